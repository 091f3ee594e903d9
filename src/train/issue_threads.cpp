// IssueThreads: persistent threads started once, woken per micro-batch by a generation counter.
#include "cgdp/train/issue_threads.hpp"

#include <unistd.h>

namespace cgdp {

IssueThreads::IssueThreads(int count, bool parallel, std::function<void(int)> bind)
    : count_(count), errors_(count) {
  if (!parallel || count <= 1) return;  // the caller issues; every CUDA call binds its device
  threads_.reserve(count);
  for (int w = 0; w < count; ++w)
    threads_.emplace_back([this, w, bind] { thread_main(w, bind); });
}

IssueThreads::~IssueThreads() {
  {
    const std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  start_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void IssueThreads::run(const std::function<void(int)>& work) {
  if (threads_.empty()) {
    for (int w = 0; w < count_; ++w) work(w);
    return;
  }
  std::unique_lock lock(mutex_);
  work_ = &work;
  running_ = count_;
  for (auto& e : errors_) e = nullptr;
  ++generation_;
  start_.notify_all();
  finished_.wait(lock, [this] { return running_ == 0; });
  work_ = nullptr;
  for (const std::exception_ptr& e : errors_)
    if (e) std::rethrow_exception(e);
}

void IssueThreads::thread_main(int w, const std::function<void(int)>& bind) {
  std::exception_ptr bind_error;
  try {
    if (bind) bind(w);
  } catch (...) {
    bind_error = std::current_exception();  // reported by the first run()
  }
  uint64_t seen = 0;
  std::unique_lock lock(mutex_);
  for (;;) {
    start_.wait(lock, [&] { return stopping_ || generation_ != seen; });
    if (stopping_) return;
    seen = generation_;
    const std::function<void(int)>& work = *work_;
    lock.unlock();
    std::exception_ptr error = bind_error;
    if (!error) {
      try {
        work(w);
      } catch (...) {
        error = std::current_exception();
      }
    }
    lock.lock();
    errors_[w] = error;
    if (--running_ == 0) finished_.notify_one();
  }
}

int64_t issuing_thread_id() { return static_cast<int64_t>(gettid()); }

}  // namespace cgdp
