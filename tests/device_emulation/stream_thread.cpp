#include "stream_thread.hpp"

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <exception>

#include "lag_scheduler.hpp"

namespace cgdp_device_emulation {

StreamThread::StreamThread(int device, StreamMode mode) : device_(device), mode_(mode) {
  if (mode_ == StreamMode::inline_work) return;
  if (mode_ == StreamMode::lagging) lag_scheduler::add(this);
  thread_ = std::thread([this] { run(); });
}

StreamThread::~StreamThread() {
  if (!thread_.joinable()) return;
  if (mode_ == StreamMode::lagging) lag_scheduler::remove(this);
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

uint64_t StreamThread::push(std::function<void()> work) {
  if (mode_ == StreamMode::inline_work) {  // the work is done when it is issued
    run_one(work);
    std::lock_guard lock(mutex_);
    done_ = ++issued_;
    return issued_;
  }
  uint64_t position = 0;
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(std::move(work));
    position = ++issued_;
    if (mode_ == StreamMode::lagging) {
      last_push_ns_ = lag_scheduler::now_ns();
      lag_scheduler::pushed(last_push_ns_);
    }
  }
  changed_.notify_all();
  return position;
}

uint64_t StreamThread::issued() const {
  std::lock_guard lock(mutex_);
  return issued_;
}

bool StreamThread::reached(uint64_t position) const {
  std::lock_guard lock(mutex_);
  return done_ >= position;
}

void StreamThread::wait_for(uint64_t position) const {
  std::unique_lock lock(mutex_);
  if (position > demanded_) {
    demanded_ = position;
    changed_.notify_all();
  }
  changed_.wait(lock, [&] { return done_ >= position; });
}

bool StreamThread::lags(int64_t* last_push_ns) const {
  std::lock_guard lock(mutex_);
  *last_push_ns = last_push_ns_;
  return mode_ == StreamMode::lagging && demanded_ < issued_;
}

void StreamThread::catch_up() {
  {
    std::lock_guard lock(mutex_);
    demanded_ = issued_;
  }
  changed_.notify_all();
}

// The next work may run: it is there, and (lagging) waited for, or the stream is stopping.
bool StreamThread::runnable() const {
  if (queue_.empty()) return false;
  return mode_ != StreamMode::lagging || stopping_ || done_ < demanded_;
}

void StreamThread::run() {
  cudaSetDevice(device_);  // what the work asks of the runtime is about this stream's GPU
  std::unique_lock lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return runnable() || (stopping_ && queue_.empty()); });
    if (queue_.empty()) return;  // stopping, and nothing left
    std::function<void()> work = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    if (mode_ == StreamMode::lagging) lag_scheduler::working(true);
    run_one(work);
    if (mode_ == StreamMode::lagging) lag_scheduler::working(false);
    lock.lock();
    ++done_;
    changed_.notify_all();
  }
}

// A GPU reports a fault at a later call, and the run fails there: here the process ends at once,
// with what went wrong, before a later call can read what the failed work did not write.
void StreamThread::run_one(const std::function<void()>& work) const {
  try {
    work();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "emulated GPU cuda:%d: work on a stream failed: %s\n", device_, e.what());
    std::abort();
  } catch (...) {
    std::fprintf(stderr, "emulated GPU cuda:%d: work on a stream failed\n", device_);
    std::abort();
  }
}

}  // namespace cgdp_device_emulation
