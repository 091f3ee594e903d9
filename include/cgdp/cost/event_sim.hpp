// A small discrete-event simulation of streams: each stream runs its tasks in the order they were
// added, up to `width` at once (1: one at a time), each once its dependencies have finished; a task
// takes a fixed time and then moves its bytes at a rate it shares with the other tasks of its pool
// that are moving bytes at the same time (max-min fair: a task never goes faster than its own cap).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace cgdp {

class EventSim {
 public:
  struct Task {
    int stream = 0;
    double fixed_us = 0;       // first: a fixed time (latency, compute, a host sum)
    int64_t bytes = 0;         // then: bytes at up to cap_gbps (1e9 bytes/s) in `pool`
    double cap_gbps = 0;       // > 0 when bytes > 0
    int pool = -1;             // index from add_pool, or -1: the task alone sets its rate
    std::vector<int> deps;     // tasks that must finish first
    double not_before_us = 0;  // earliest start
  };

  // width > 1: a queue served by `width` workers (the aggregator's sum lanes), first come first
  // served.
  int add_stream(int width = 1);
  int add_pool(double gbps);  // gbps 0: unlimited (each task at its cap)
  int add(Task task);         // returns the task's id
  // Runs to completion; throws Error when the tasks deadlock (a dependency that never finishes).
  void run();
  double start_us(int task) const { return start_[task]; }
  double end_us(int task) const { return end_[task]; }
  double makespan_us() const;

 private:
  struct Running;
  void start_ready(double now, std::vector<Running>& running, std::vector<size_t>& next);
  void set_rates(std::vector<Running>& running, double now) const;
  static double finish_us(const Running& r, double now);

  std::vector<Task> tasks_;
  std::vector<std::vector<int>> streams_;  // task ids in issue order
  std::vector<int> widths_;                // tasks a stream runs at once
  std::vector<double> pools_;
  std::vector<double> start_, end_;
  std::vector<bool> done_;
};

}  // namespace cgdp
