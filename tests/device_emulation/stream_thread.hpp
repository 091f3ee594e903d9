// One emulated CUDA stream's work, run in issue order by a thread of its own, beside the host and
// the other streams, as a GPU runs a stream (emulated_runtime.cpp).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace cgdp_device_emulation {

// How the emulated streams run their work (CGDP_EMULATED_STREAMS).
enum class StreamMode {
  inline_work,  // on the issuing thread as it is pushed: no thread
  async,        // on the stream's thread as soon as it can
  lagging,      // on the stream's thread, only once waited for or the host is idle (lag_scheduler)
};

class StreamThread {
 public:
  // `device`: the GPU the work runs on (current on the thread).
  StreamThread(int device, StreamMode mode);
  ~StreamThread();  // runs what is left, then stops
  StreamThread(const StreamThread&) = delete;
  StreamThread& operator=(const StreamThread&) = delete;

  // Appends `work`; returns its position (1, 2, ...). An exception from it ends the process.
  uint64_t push(std::function<void()> work);
  // The position of the last work pushed (0: none yet).
  uint64_t issued() const;
  // Whether the work up to `position` has run (asking does not hurry a lagging stream).
  bool reached(uint64_t position) const;
  // Blocks until the work up to `position` has run.
  void wait_for(uint64_t position) const;
  void finish() const { wait_for(issued()); }

  // Lagging: whether work is queued that nobody waits for yet, and when it was last pushed.
  bool lags(int64_t* last_push_ns) const;
  // Lagging: lets everything issued so far run (the lag scheduler, when the host is idle).
  void catch_up();

 private:
  void run();
  void run_one(const std::function<void()>& work) const;
  bool runnable() const;  // mutex_ held

  const int device_;
  const StreamMode mode_;
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  std::deque<std::function<void()>> queue_;
  uint64_t issued_ = 0, done_ = 0;
  mutable uint64_t demanded_ = 0;  // lagging: the work up to here may run
  int64_t last_push_ns_ = 0;
  bool stopping_ = false;
  std::thread thread_;  // last: starts once the rest is there; none with inline work
};

}  // namespace cgdp_device_emulation
