// Gradient accumulation folds micro-batches in the binary-tree order of host_sum: M micro-batches
// folded one by one give the bits sum_buffers gives for M workers' gradients at once.
#include "cgdp/train/gradient_fold.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "cgdp/device/cpu_device.hpp"
#include "cgdp/sync/host_sum.hpp"

namespace cgdp {
namespace {

// Wide-ranging magnitudes, so that any other summation order shows in the bits.
std::vector<std::vector<float>> micro_gradients(int micros, int64_t n) {
  std::mt19937_64 rng(42 + micros);
  std::uniform_real_distribution<float> mantissa(-1.f, 1.f);
  std::uniform_int_distribution<int> exponent(-20, 20);
  std::vector<std::vector<float>> g(micros, std::vector<float>(n));
  for (auto& b : g)
    for (auto& x : b) x = std::ldexp(mantissa(rng), exponent(rng));
  return g;
}

TEST(GradientFold, FoldsMicroBatchesInTheOrderWorkersAreSummedIn) {
  const int64_t n = 5000;
  for (int micros = 2; micros <= 11; ++micros) {
    const auto g = micro_gradients(micros, n);
    std::vector<const float*> srcs;
    for (const auto& b : g) srcs.push_back(b.data());
    std::vector<float> want(n);
    sum_buffers(want.data(), srcs, n, 1);

    CpuDevice device;
    auto stream = device.create_stream("compute");
    GradientFold fold;
    std::vector<float> diff(n);
    for (int m = 0; m < micros; ++m) {
      stream->submit([&, m] { diff = g[m]; });  // backward of micro-batch m
      if (m + 1 < micros) {
        fold.add(device, *stream, diff.data(), n, m);
      } else {  // the last one folds in two ranges, as layers do
        fold.fold_into(device, *stream, diff.data(), 0, n / 3, m);
        fold.fold_into(device, *stream, diff.data(), n / 3, n, m);
      }
    }
    stream->synchronize();
    EXPECT_EQ(0, std::memcmp(want.data(), diff.data(), n * sizeof(float))) << micros << " micro-batches";
  }
}

}  // namespace
}  // namespace cgdp
