// One host thread per worker that issues the worker's work onto its streams. On CUDA every layer
// is tens of driver and cuDNN calls issued from the host; one thread issuing every worker in turn
// would make GPU k wait until workers 0..k-1 had been issued.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace cgdp {

class IssueThreads {
 public:
  // `count` threads; thread w runs `bind(w)` once before any work (to make worker w's device its
  // current one). `parallel` false or one worker: no threads; run() calls every worker's work in
  // turn on the caller, as a single-threaded trainer does (for comparisons).
  IssueThreads(int count, bool parallel, std::function<void(int)> bind);
  ~IssueThreads();
  IssueThreads(const IssueThreads&) = delete;
  IssueThreads& operator=(const IssueThreads&) = delete;

  // Runs work(w) for every worker w, each on its own thread, and returns once all have returned.
  // If any threw, rethrows the exception of the lowest such w (after every worker has finished,
  // so none is left issuing).
  void run(const std::function<void(int)>& work);

  bool parallel() const { return !threads_.empty(); }

 private:
  void thread_main(int w, const std::function<void(int)>& bind);

  int count_;
  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable start_, finished_;
  const std::function<void(int)>* work_ = nullptr;
  uint64_t generation_ = 0;  // bumped by every run(); a thread works once per generation
  int running_ = 0;
  bool stopping_ = false;
  std::vector<std::exception_ptr> errors_;
};

// The kernel's id of the calling thread, as the timeline shows which thread issued what.
int64_t issuing_thread_id();

}  // namespace cgdp
