// CPU stream and event: a worker thread draining an ordered queue; events are sequence numbers.
#pragma once

#include <condition_variable>
#include <atomic>
#include <deque>
#include <memory>
#include <exception>
#include <mutex>
#include <thread>

#include "cgdp/device/device.hpp"

namespace cgdp {

class CpuEvent final : public Event {
 public:
  bool query() override;
  void synchronize() override;

  // Called by a stream's record(): the number the completion must reach.
  uint64_t next_sequence();
  uint64_t last_recorded();
  // Called from the recording stream once the captured work has run (or failed).
  void complete(uint64_t sequence, std::exception_ptr error);
  // Blocks until `sequence` has completed; rethrows the recording stream's error.
  void wait_for(uint64_t sequence);

 private:
  std::mutex mutex_;
  std::condition_variable done_;
  uint64_t recorded_ = 0;
  uint64_t completed_ = 0;
  std::exception_ptr error_;
};

class CpuStream final : public Stream {
 public:
  // `copy_budget` counts async copies left before injected failures (negative: unlimited).
  CpuStream(std::string name, std::string device_name,
            std::shared_ptr<std::atomic<int64_t>> copy_budget);
  ~CpuStream() override;

  const std::string& name() const override { return name_; }
  void submit(std::function<void()> work) override;
  void copy_async(void* dst, const void* src, size_t bytes) override;
  void zero_async(void* dst, size_t bytes) override;
  void record(Event& event) override;
  void wait(Event& event) override;
  void launch_host_func(std::function<void()> fn) override;
  void synchronize() override;

 private:
  struct Task {
    std::function<void()> fn;
    bool runs_after_failure;  // event records still complete, so waiters never hang
  };
  void enqueue(Task task);
  void run_worker();

  std::string name_;
  std::string device_name_;
  std::shared_ptr<std::atomic<int64_t>> copy_budget_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Task> queue_;
  bool busy_ = false;
  bool stopping_ = false;
  std::exception_ptr error_;
  std::thread worker_;
};

}  // namespace cgdp
