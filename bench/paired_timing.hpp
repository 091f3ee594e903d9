// Helpers for paired benchmarks: each iteration times two or more kernels back to back, so that
// their ratio is taken at one moment of a shared machine whose speed swings within seconds, and
// the counters are medians over the iterations.
#pragma once

#include <chrono>

#include "cgdp/cost/fits.hpp"

namespace cgdp::bench {

using cgdp::median;  // the profiler's (the mean of the middle two for an even count)

// Wall seconds of one call of fn().
template <typename Fn>
double seconds(Fn&& fn) {
  const auto start = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace cgdp::bench
