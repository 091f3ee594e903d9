// The data loader as a stage of an iteration: its threads must decode every worker's batch in the
// time the workers take for it, or the iteration waits on them. Threads are taken to add up (the
// profile's per-thread rate times the threads), which holds while each has a core of its own.
#pragma once

#include "cgdp/cost/profile.hpp"

namespace cgdp {

struct LoaderPrediction {
  double needed_images_per_s = 0;  // samples per iteration over the workers' iteration time
  int threads_needed = 0;          // threads that decode that fast
  int threads = 0;                 // threads it has
  double images_per_s = 0;         // what those threads decode
  double iteration_us = 0;         // the workers' time, or the loader's when it is slower
  bool loader_bound = false;
};

// `samples` per iteration (workers x batch) against `iteration_us`, the workers' predicted time.
LoaderPrediction predict_loader(const LoaderCost& loader, int64_t samples, double iteration_us,
                                int threads);

}  // namespace cgdp
