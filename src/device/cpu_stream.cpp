// CPU streams: one worker thread per stream; a failed task poisons the stream and its events.
#include "cpu_stream.hpp"

#include <pthread.h>

#include <algorithm>
#include <cstring>

#include "cgdp/core/error.hpp"

namespace cgdp {

bool CpuEvent::query() {
  std::lock_guard lock(mutex_);
  return completed_ >= recorded_;
}

void CpuEvent::synchronize() { wait_for(last_recorded()); }

uint64_t CpuEvent::next_sequence() {
  std::lock_guard lock(mutex_);
  return ++recorded_;
}

uint64_t CpuEvent::last_recorded() {
  std::lock_guard lock(mutex_);
  return recorded_;
}

void CpuEvent::complete(uint64_t sequence, std::exception_ptr error) {
  // Notified under the lock: a waiter that wakes may destroy the event at once (ThreadSanitizer
  // saw the condition variable destroyed while notify_all still read it).
  std::lock_guard lock(mutex_);
  completed_ = std::max(completed_, sequence);
  if (error && !error_) error_ = error;
  done_.notify_all();
}

void CpuEvent::wait_for(uint64_t sequence) {
  std::unique_lock lock(mutex_);
  done_.wait(lock, [&] { return completed_ >= sequence; });
  if (error_) std::rethrow_exception(error_);
}

CpuStream::CpuStream(std::string name, std::string device_name,
                     std::shared_ptr<std::atomic<int64_t>> copy_budget)
    : name_(std::move(name)), device_name_(std::move(device_name)), copy_budget_(std::move(copy_budget)) {
  worker_ = std::thread([this] { run_worker(); });
  pthread_setname_np(worker_.native_handle(), name_.substr(0, 15).c_str());
}

CpuStream::~CpuStream() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  worker_.join();
}

void CpuStream::enqueue(Task task) {
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(std::move(task));
  }
  changed_.notify_all();
}

void CpuStream::run_worker() {
  for (;;) {
    Task task;
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and everything queued has run
      task = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
      if (error_ && !task.runs_after_failure) {
        busy_ = false;
        changed_.notify_all();
        continue;
      }
    }
    std::exception_ptr failure;
    try {
      task.fn();
    } catch (...) {
      failure = std::current_exception();
    }
    {
      std::lock_guard lock(mutex_);
      if (failure && !error_) error_ = failure;
      busy_ = false;
    }
    changed_.notify_all();
  }
}

void CpuStream::submit(std::function<void()> work) { enqueue({std::move(work), false}); }

void CpuStream::copy_async(void* dst, const void* src, size_t bytes) {
  enqueue({[=, this] {
             if (copy_budget_->load() >= 0 && copy_budget_->fetch_sub(1) <= 0)
               throw DeviceError(cat(device_name_, ": copy of ", bytes, " bytes on stream '", name_,
                                     "' failed (injected fault)"));
             std::memcpy(dst, src, bytes);
           },
           false});
}

void CpuStream::zero_async(void* dst, size_t bytes) {
  enqueue({[=] { std::memset(dst, 0, bytes); }, false});
}

void CpuStream::record(Event& event) {
  auto& cpu_event = dynamic_cast<CpuEvent&>(event);
  const uint64_t sequence = cpu_event.next_sequence();
  enqueue({[this, &cpu_event, sequence] {
             std::exception_ptr error;
             {
               std::lock_guard lock(mutex_);
               error = error_;
             }
             cpu_event.complete(sequence, error);
           },
           true});
}

void CpuStream::wait(Event& event) {
  auto& cpu_event = dynamic_cast<CpuEvent&>(event);
  const uint64_t sequence = cpu_event.last_recorded();
  if (sequence == 0) return;  // never recorded: nothing to wait for, as in CUDA
  enqueue({[&cpu_event, sequence] { cpu_event.wait_for(sequence); }, false});
}

void CpuStream::launch_host_func(std::function<void()> fn) { enqueue({std::move(fn), false}); }

void CpuStream::synchronize() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return queue_.empty() && !busy_; });
  if (error_) std::rethrow_exception(error_);
}

}  // namespace cgdp
