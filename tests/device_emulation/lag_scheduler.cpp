#include "lag_scheduler.hpp"

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>

#include "stream_thread.hpp"

namespace cgdp_device_emulation::lag_scheduler {
namespace {

struct State {
  std::mutex mutex;  // before any stream's own
  std::set<StreamThread*> streams;
  std::atomic<int64_t> last_push_ns{0};
  std::atomic<int> running{0};  // lagging streams' threads in the middle of a piece of work
  // How long the host must issue nothing before a stream that nobody waits for runs: long enough
  // for a host thread to issue a layer's work in one go, short beside a test's run.
  std::atomic<int64_t> idle_ns{1'000'000};
  bool started = false;
};

// Never destroyed: its thread runs until the process exits.
State& state() {
  static State& s = *new State;
  return s;
}

// The lagging stream pushed to last, or none.
StreamThread* last_pushed_lagging(State& s) {
  StreamThread* latest = nullptr;
  int64_t latest_ns = 0;
  for (StreamThread* stream : s.streams) {
    int64_t pushed_ns = 0;
    if (stream->lags(&pushed_ns) && (!latest || pushed_ns > latest_ns)) {
      latest = stream;
      latest_ns = pushed_ns;
    }
  }
  return latest;
}

void schedule() {
  State& s = state();
  for (;;) {
    const int64_t idle_ns = s.idle_ns.load(std::memory_order_relaxed);
    int64_t idle_for = now_ns() - s.last_push_ns.load(std::memory_order_relaxed);
    if (s.running.load() > 0) idle_for = 0;  // the GPU is busy: a wait may still demand the rest
    if (idle_for < idle_ns) {
      std::this_thread::sleep_for(std::chrono::nanoseconds(idle_ns - idle_for));
      continue;
    }
    {
      std::lock_guard lock(s.mutex);
      if (StreamThread* stream = last_pushed_lagging(s)) stream->catch_up();
    }
    std::this_thread::sleep_for(std::chrono::nanoseconds(idle_ns));
  }
}

}  // namespace

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void add(StreamThread* stream) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  s.streams.insert(stream);
  if (!s.started) {
    std::thread(schedule).detach();
    s.started = true;
  }
}

void remove(StreamThread* stream) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  s.streams.erase(stream);
}

void set_idle_ns(int64_t ns) {
  state().idle_ns.store(ns, std::memory_order_relaxed);
}

void working(bool started) {
  state().running.fetch_add(started ? 1 : -1);
}

void pushed(int64_t when_ns) {
  state().last_push_ns.store(when_ns, std::memory_order_relaxed);
}

}  // namespace cgdp_device_emulation::lag_scheduler
