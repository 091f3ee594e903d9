// Helpers for paired benchmarks: each iteration times two or more kernels back to back, so that
// their ratio is taken at one moment of a shared machine whose speed swings within seconds, and
// the counters are medians over the iterations.
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

namespace cgdp::bench {

// Wall seconds of one call of fn().
template <typename Fn>
double seconds(Fn&& fn) {
  const auto start = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The middle value (the mean of the two middle ones for an even count); v must not be empty.
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace cgdp::bench
