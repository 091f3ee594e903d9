#include "stream_thread.hpp"

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <exception>

namespace cgdp_device_emulation {

StreamThread::StreamThread(int device, bool inline_work) : device_(device) {
  if (!inline_work) thread_ = std::thread([this] { run(); });
}

StreamThread::~StreamThread() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

uint64_t StreamThread::push(std::function<void()> work) {
  if (!thread_.joinable()) {  // inline: the work is done when it is issued
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
  changed_.wait(lock, [&] { return done_ >= position; });
}

void StreamThread::run() {
  cudaSetDevice(device_);  // what the work asks of the runtime is about this stream's GPU
  std::unique_lock lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and nothing left
    std::function<void()> work = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    run_one(work);
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
