// Helpers of kernel_emulation_test's files: inputs, the emulated kernels' outputs compared with
// their references (bit for bit, or within a tolerance, naming the first elements that differ), a
// scratch with a guard, and parameterized cases' names.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "cgdp/core/error.hpp"

namespace cgdp::kernel_checks {

using testing::AssertionFailure;
using testing::AssertionResult;
using testing::AssertionSuccess;

// n values uniform in [lo, hi), the same for a seed on every run.
template <typename T = float>
std::vector<T> uniform(int64_t n, double lo, double hi, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<T> v(static_cast<size_t>(n));
  for (T& x : v) x = static_cast<T>(d(rng));
  return v;
}

// A float as printed; an integer (16-bit bits, codes) in hex.
template <typename T>
std::string printable(T v) {
  if constexpr (std::is_floating_point_v<T>) return cat(v);
  std::ostringstream out;
  out << "0x" << std::hex << static_cast<uint64_t>(v);
  return out.str();
}

// Equal bits (or, with nan_equal, both NaN), naming the first elements that differ.
template <typename T>
AssertionResult same_bits(const std::vector<T>& got, const std::vector<T>& want,
                          bool nan_equal = false) {
  if (got.size() != want.size())
    return AssertionFailure() << "sizes " << got.size() << " vs " << want.size();
  int64_t wrong = 0;
  std::ostringstream first;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(T)) == 0) continue;
    if constexpr (std::is_floating_point_v<T>)
      if (nan_equal && std::isnan(got[i]) && std::isnan(want[i])) continue;
    if (wrong++ < 5)
      first << " [" << i << "] " << printable(got[i]) << " vs " << printable(want[i]);
  }
  if (wrong == 0) return AssertionSuccess();
  return AssertionFailure() << wrong << " of " << got.size()
                            << " differ (got vs want):" << first.str();
}

// |want - got| <= atol + rtol * |want| everywhere (equal infinities, and NaN for NaN, pass).
template <typename T>
AssertionResult close_to(const std::vector<T>& got, const std::vector<double>& want, double atol,
                         double rtol) {
  if (got.size() != want.size())
    return AssertionFailure() << "sizes " << got.size() << " vs " << want.size();
  int64_t wrong = 0;
  std::ostringstream first;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = static_cast<double>(got[i]);
    if (g == want[i] || (std::isnan(g) && std::isnan(want[i]))) continue;
    if (std::fabs(want[i] - g) <= atol + rtol * std::fabs(want[i])) continue;
    if (wrong++ < 5) first << " [" << i << "] " << g << " vs " << want[i];
  }
  if (wrong == 0) return AssertionSuccess();
  return AssertionFailure() << wrong << " of " << got.size()
                            << " off (got vs want):" << first.str();
}

// A device scratch of `bytes` followed by a guard: the kernels must leave the guard as it was.
class GuardedScratch {
 public:
  explicit GuardedScratch(int64_t bytes)
      : bytes_(static_cast<size_t>(bytes)), memory_(bytes_ + kGuard, 0x5A) {}
  void* data() { return memory_.data(); }
  bool guard_intact() const {
    return std::all_of(memory_.begin() + static_cast<std::ptrdiff_t>(bytes_), memory_.end(),
                       [](unsigned char b) { return b == 0x5A; });
  }

 private:
  static constexpr size_t kGuard = 256;
  size_t bytes_;
  std::vector<unsigned char> memory_;
};

// A parameterized case's name: its test's suffix, and what gtest prints for its parameter.
struct NameOfCase {
  template <typename Case>
  std::string operator()(const testing::TestParamInfo<Case>& info) const {
    return describe(info.param);
  }
};

}  // namespace cgdp::kernel_checks
