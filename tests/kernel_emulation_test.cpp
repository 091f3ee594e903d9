// The real kernels/*.cu, run on the CPU by the kernel emulator (kernel_emulation/emulated_cuda.hpp
// says how, and what it cannot see), against their CPU twins bit for bit where the project has
// them (16-bit rounding, pooling's window codes, the host sum, fp16's scale, ReLU's packed signs),
// else against float64 loops within |want - got| <= atol + rtol * |want|. Then the emulator's own
// barriers, thread orders and launch checks. kernel_emulation_more_test.cpp, in the same
// executable, holds the other layers' kernels (Accuracy, ArgMax, Crop, Dropout, Eltwise, the
// losses, the neuron functions, SoftmaxWithLoss, stochastic pooling); CTest runs both files' tests
// once per thread order (kernel_emulation/ and kernel_emulation_reverse/).
// Not covered, as too many blocks to emulate in seconds: the transpose's stride over more than
// 65535 tiles of rows or images, widen_with_epilogue's over more than 65535 rows of planes,
// plane_launch's flat fallback for planes of more than 65535 tiles, and BatchNorm with more
// channels than kMaxPartials (the same kernels with one slice a channel, which small shapes run).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "batch_norm.cuh"
#include "cgdp/core/error.hpp"
#include "cgdp/device/layer_precision.hpp"
#include "cgdp/layers/pool_window_code.hpp"
#include "cgdp/sync/exchange_dtype.hpp"
#include "cgdp/sync/host_sum.hpp"
#include "class_labels.cuh"
#include "emulator_probes.cuh"
#include "exchange_codec.cuh"
#include "half_convert.cuh"
#include "kernel_checks.hpp"
#include "launch.cuh"
#include "lrn.cuh"
#include "mvn.cuh"
#include "per_channel_scratch.cuh"
#include "pooling.cuh"
#include "prelu.cuh"
#include "relu.cuh"
#include "scale.cuh"
#include "solver_update.cuh"
#include "sum.cuh"

// Names of the kernels' enums, for parameterized tests (found by argument-dependent lookup).
namespace cgdp::kernels {
static std::string describe(Half16 type) {
  return type == Half16::Bf16 ? "bf16" : "fp16";
}
static void PrintTo(Half16 type, std::ostream* out) {
  *out << describe(type);
}
static std::string describe(Rule rule) {
  const char* names[] = {"sgd", "nesterov", "adagrad", "rmsprop", "adadelta", "adam"};
  return names[static_cast<int>(rule)];
}
static void PrintTo(Rule rule, std::ostream* out) {
  *out << describe(rule);
}
}  // namespace cgdp::kernels

namespace cgdp {
namespace {

using kernels::Half16;
using namespace kernel_checks;

// ---- helpers ----

Precision precision_of(Half16 type) {
  return type == Half16::Bf16 ? Precision::kBf16 : Precision::kFp16;
}

// The elements a grid-stride loop reaches only after its first pass: past blocks_for's cap.
int64_t past_the_capped_grid() {
  const int64_t capped = int64_t{kernels::blocks_for(int64_t{1} << 40)} * kernels::kThreads;
  return capped + capped / 3 + 7;
}

// ---- 16-bit conversions (half_convert.cu) ----

struct ChannelsLastCase {
  Half16 type;
  int64_t images, channels, spatial;
};

std::string describe(const ChannelsLastCase& c) {
  return cat(c.type == Half16::Bf16 ? "bf16_" : "fp16_", c.images, "x", c.channels, "x", c.spatial);
}
void PrintTo(const ChannelsLastCase& c, std::ostream* out) {
  *out << describe(c);
}

class ChannelsLast : public testing::TestWithParam<ChannelsLastCase> {};

// NCHW's values in NHWC order, per image.
template <typename T>
std::vector<T> to_channels_last(const std::vector<T>& nchw, int64_t images, int64_t channels,
                                int64_t spatial) {
  std::vector<T> nhwc(nchw.size());
  for (int64_t i = 0; i < images; ++i)
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t s = 0; s < spatial; ++s)
        nhwc[(i * spatial + s) * channels + c] = nchw[(i * channels + c) * spatial + s];
  return nhwc;
}

TEST_P(ChannelsLast, NarrowTransposeWidenAndEpiloguesMatchTheCpuRounding) {
  const auto [type, images, channels, spatial] = GetParam();
  const int64_t n = images * channels * spatial;
  const Precision precision = precision_of(type);
  const std::vector<float> src = uniform(n, -3, 3, 1);
  std::vector<uint16_t> nchw(n);
  narrow_to_precision(precision, src.data(), nchw.data(), n);
  const std::vector<uint16_t> nhwc = to_channels_last(nchw, images, channels, spatial);

  std::vector<uint16_t> narrowed(n, 0xABCD), moved(n, 0xABCD);
  kernels::narrow_to_channels_last(src.data(), narrowed.data(), images, channels, spatial, type,
                                   nullptr);
  EXPECT_TRUE(same_bits(narrowed, nhwc)) << "narrow_to_channels_last";
  kernels::transpose_to_channels_last(nchw.data(), moved.data(), images, channels, spatial,
                                      nullptr);
  EXPECT_TRUE(same_bits(moved, nhwc)) << "transpose_to_channels_last";

  std::vector<float> widened_want(n);
  widen_from_precision(precision, nchw.data(), widened_want.data(), n);
  std::vector<float> widened(n, 7.f), sums(n, 0.5f), sums_want(n);
  kernels::widen_from_channels_last(nhwc.data(), widened.data(), images, channels, spatial, type,
                                    false, nullptr);
  EXPECT_TRUE(same_bits(widened, widened_want)) << "widen_from_channels_last";
  for (int64_t k = 0; k < n; ++k) sums_want[k] = 0.5f + widened_want[k];
  kernels::widen_from_channels_last(nhwc.data(), sums.data(), images, channels, spatial, type, true,
                                    nullptr);
  EXPECT_TRUE(same_bits(sums, sums_want)) << "widen_from_channels_last, accumulating";

  const std::vector<float> bias = uniform(channels, -1, 1, 2);
  for (const bool relu : {false, true})
    for (const bool has_bias : {false, true}) {
      if (!relu && !has_bias) continue;
      SCOPED_TRACE(cat("epilogue: relu ", relu, ", bias ", has_bias));
      const kernels::Epilogue epilogue{has_bias ? bias.data() : nullptr, relu};
      std::vector<float> want(n), from_nhwc(n, 9.f), from_nchw(n, 9.f);
      for (int64_t k = 0; k < n; ++k) {
        const float v = widened_want[k] + (has_bias ? bias[(k / spatial) % channels] : 0.f);
        want[k] = relu && v < 0.f ? 0.f : v;
      }
      kernels::widen_from_channels_last(nhwc.data(), from_nhwc.data(), images, channels, spatial,
                                        type, false, nullptr, epilogue);
      EXPECT_TRUE(same_bits(from_nhwc, want)) << "widen_from_channels_last";
      kernels::widen_with_epilogue(nchw.data(), from_nchw.data(), images, channels, spatial,
                                   epilogue, type, nullptr);
      EXPECT_TRUE(same_bits(from_nchw, want)) << "widen_with_epilogue";
    }
}

// Channel counts on and off the 32x32 tiles, planes of one element and single channels (the
// paths without a transpose), more images than one.
std::vector<ChannelsLastCase> channels_last_cases() {
  std::vector<ChannelsLastCase> cases;
  for (const Half16 type : {Half16::Bf16, Half16::Fp16})
    for (const auto [images, channels, spatial] : {std::array<int64_t, 3>{2, 40, 36},
                                                   {3, 33, 70},
                                                   {1, 1, 5},
                                                   {2, 5, 1},
                                                   {2, 8, 49},
                                                   {5, 3, 2},
                                                   {2, 64, 33}})
      cases.push_back({type, images, channels, spatial});
  return cases;
}
INSTANTIATE_TEST_SUITE_P(HalfConvert, ChannelsLast, testing::ValuesIn(channels_last_cases()),
                         NameOfCase());

class FlatConversions : public testing::TestWithParam<Half16> {};

// Every 4099th float bit pattern (normals, subnormals, overflow of both signs) and the edges:
// ties, fp16's largest and its rounding to infinity, its smallest subnormal and half of it.
std::vector<float> floats_of_every_kind() {
  std::vector<float> v = {0.f,           -0.f,       1.f,       -2.f,    1.00390625f, 1.01171875f,
                          1.00048828f,   65504.f,    65519.99f, 65520.f, 0x1p-24f,    0x1p-25f,
                          0x1.0001p-25f, 0x1.8p-24f, 1e-45f,    -1e-45f, 1e-30f,      FLT_MAX,
                          -FLT_MAX,      INFINITY,   -INFINITY};
  for (uint64_t bits = 0; bits <= 0xFFFFFFFFull; bits += 4099) {
    const float f = std::bit_cast<float>(static_cast<uint32_t>(bits));
    if (!std::isnan(f)) v.push_back(f);
  }
  return v;
}

TEST_P(FlatConversions, EveryKindOfFloatRoundsAsTheCpu) {
  const Half16 type = GetParam();
  const Precision precision = precision_of(type);
  const std::vector<float> values = floats_of_every_kind();
  const int64_t n = static_cast<int64_t>(values.size());
  std::vector<uint16_t> want(n), got(n, 0xABCD);
  narrow_to_precision(precision, values.data(), want.data(), n);
  kernels::narrow(values.data(), got.data(), n, type, nullptr, nullptr);
  EXPECT_TRUE(same_bits(got, want)) << "narrow";

  narrow_keeping_signs(precision, values.data(), want.data(), n);
  kernels::narrow_keeping_signs(values.data(), got.data(), n, type, nullptr);
  EXPECT_TRUE(same_bits(got, want)) << "narrow_keeping_signs";

  std::vector<float> rounded_want(n), rounded(n);
  round_to_precision(precision, values.data(), rounded_want.data(), n);
  kernels::round_to_half(values.data(), rounded.data(), n, type, nullptr);
  EXPECT_TRUE(same_bits(rounded, rounded_want)) << "round_to_half";

  const float scale = 4.f;
  std::vector<float> scaled(n);
  for (int64_t k = 0; k < n; ++k) scaled[k] = values[k] * scale;
  narrow_to_precision(precision, scaled.data(), want.data(), n);
  kernels::narrow(values.data(), got.data(), n, type, &scale, nullptr);
  EXPECT_TRUE(same_bits(got, want)) << "narrow, scaled";
}

TEST_P(FlatConversions, EverySixteenBitNumberWidensAsTheCpu) {
  const Half16 type = GetParam();
  const Precision precision = precision_of(type);
  std::vector<uint16_t> all(65536);
  std::iota(all.begin(), all.end(), uint16_t{0});
  std::vector<float> want(all.size()), got(all.size(), 7.f);
  widen_from_precision(precision, all.data(), want.data(), 65536);
  kernels::widen(all.data(), got.data(), 65536, type, nullptr, nullptr);
  EXPECT_TRUE(same_bits(got, want, /*nan_equal=*/true)) << "widen";

  const float scale = 8.f;
  std::vector<float> unscaled(want.size()), added(want.size(), 0.25f), added_want(want.size());
  for (size_t k = 0; k < want.size(); ++k) {
    added_want[k] = 0.25f + want[k];
    want[k] /= scale;
  }
  kernels::widen(all.data(), unscaled.data(), 65536, type, &scale, nullptr);
  EXPECT_TRUE(same_bits(unscaled, want, true)) << "widen, scaled";
  kernels::widen_add(all.data(), added.data(), 65536, type, nullptr);
  EXPECT_TRUE(same_bits(added, added_want, true)) << "widen_add";
}

TEST_P(FlatConversions, NaNNarrowsToTheCanonicalNaN) {
  const Half16 type = GetParam();
  const std::vector<float> nans = {std::numeric_limits<float>::quiet_NaN(),
                                   -std::numeric_limits<float>::quiet_NaN(),
                                   std::bit_cast<float>(0x7F800001u),  // signalling, low payload
                                   std::bit_cast<float>(0xFFC00001u)};
  std::vector<uint16_t> got(nans.size());
  kernels::narrow(nans.data(), got.data(), static_cast<int64_t>(nans.size()), type, nullptr,
                  nullptr);
  EXPECT_TRUE(same_bits(got, std::vector<uint16_t>(nans.size(), 0x7FFF)));
}

INSTANTIATE_TEST_SUITE_P(HalfConvert, FlatConversions, testing::Values(Half16::Bf16, Half16::Fp16),
                         NameOfCase());

// ---- grid-stride loops past the capped grid (launch.cuh's blocks_for) ----

TEST(GridStride, ElementwiseKernelsReachElementsPastTheCappedGrid) {
  const int64_t n = past_the_capped_grid();
  std::vector<float> x = uniform(n, -4, 4, 3);
  x[n - 1] = -100.f;  // max_abs's answer, reached only on a thread's second pass

  std::vector<float> y(n, 9.f), y_want(n);
  for (int64_t k = 0; k < n; ++k) y_want[k] = std::max(x[k], 0.f) + 0.5f * std::min(x[k], 0.f);
  kernels::relu_forward(x.data(), y.data(), n, 0.5f, nullptr);
  EXPECT_TRUE(same_bits(y, y_want)) << "relu_forward";

  std::vector<uint16_t> narrowed(n, 0xABCD), narrowed_want(n);
  narrow_to_precision(Precision::kBf16, x.data(), narrowed_want.data(), n);
  kernels::narrow(x.data(), narrowed.data(), n, Half16::Bf16, nullptr, nullptr);
  EXPECT_TRUE(same_bits(narrowed, narrowed_want)) << "narrow";

  const float* sources[] = {x.data(), y.data()};
  std::vector<float> sum(n, 9.f), sum_want(n);
  cgdp::sum_buffers(sum_want.data(), sources, n, 2);
  kernels::sum_buffers(sum.data(), sources, 2, n, nullptr);
  EXPECT_TRUE(same_bits(sum, sum_want)) << "sum_buffers";

  float largest = 0.f;
  kernels::max_abs(x.data(), n, &largest, nullptr);
  EXPECT_EQ(largest, 100.f) << "max_abs";

  // One plane longer than the capped grid's x: each thread's row strides too.
  const int64_t spatial = n / 2;
  std::vector<float> widened(2 * spatial, 9.f), widened_want(2 * spatial);
  const float bias[] = {0.25f, -0.5f};
  widen_from_precision(Precision::kBf16, narrowed.data(), widened_want.data(), 2 * spatial);
  for (int64_t k = 0; k < 2 * spatial; ++k)
    widened_want[k] = std::max(widened_want[k] + bias[k / spatial], 0.f);
  kernels::widen_with_epilogue(narrowed.data(), widened.data(), 1, 2, spatial, {bias, true},
                               Half16::Bf16, nullptr);
  EXPECT_TRUE(same_bits(widened, widened_want)) << "widen_with_epilogue";
}

// ---- BatchNorm with a Scale inside (batch_norm.cu, per_channel.cuh) ----

struct BatchNormCase {
  int64_t num, channels, spatial;
  bool global = false, scale = false, bias = false, relu = false, f64 = false;
};

std::string describe(const BatchNormCase& c) {
  return cat(c.num, "x", c.channels, "x", c.spatial, c.global ? "_global" : "",
             c.scale ? "_scale" : "", c.bias ? "_bias" : "", c.relu ? "_relu" : "",
             c.f64 ? "_f64" : "");
}
void PrintTo(const BatchNormCase& c, std::ostream* out) {
  *out << describe(c);
}

class BatchNorm : public testing::TestWithParam<BatchNormCase> {};

// Each channel's float64 mean and biased variance of x (num x channels x spatial).
template <typename T>
void channel_moments(const std::vector<T>& x, const BatchNormCase& c, std::vector<double>& mean,
                     std::vector<double>& variance) {
  const double m = static_cast<double>(c.num * c.spatial);
  mean.assign(c.channels, 0.0);
  variance.assign(c.channels, 0.0);
  for (size_t k = 0; k < x.size(); ++k) mean[(k / c.spatial) % c.channels] += x[k];
  for (double& v : mean) v /= m;
  for (size_t k = 0; k < x.size(); ++k) {
    const int64_t ch = (k / c.spatial) % c.channels;
    variance[ch] += (x[k] - mean[ch]) * (x[k] - mean[ch]);
  }
  for (double& v : variance) v /= m;
}

template <typename T>
void check_batch_norm(const BatchNormCase& c) {
  const int64_t n = c.num * c.channels * c.spatial, per_channel = c.num * c.spatial;
  const kernels::BatchNormShape shape{c.num, c.channels, c.spatial};
  std::vector<T> x = uniform<T>(n, -2, 3, 4);
  for (int64_t k = 0; k < n; ++k) x[k] += T(10) * T((k / c.spatial) % c.channels);  // far from 0
  std::vector<double> mean_want, variance_want;
  channel_moments(x, c, mean_want, variance_want);

  ASSERT_LE(kernels::batch_norm_scratch_bytes(shape),
            kernels::per_channel_scratch_bound(c.channels));
  GuardedScratch scratch(kernels::batch_norm_scratch_bytes(shape));
  std::vector<T> mean(c.channels), variance(c.channels), mean_sum(c.channels, T(0.5)),
      variance_sum(c.channels, T(0.25)), factor(1, T(2));
  const T fraction = T(0.9), correction = T(per_channel) / T(per_channel - 1);
  if (c.global) {
    for (int64_t ch = 0; ch < c.channels; ++ch) {
      mean_sum[ch] = static_cast<T>(2 * mean_want[ch]);
      variance_sum[ch] = static_cast<T>(2 * variance_want[ch]);
    }
    kernels::batch_norm_global_statistics(mean_sum.data(), variance_sum.data(), factor.data(),
                                          c.channels, mean.data(), variance.data(), nullptr);
  } else {
    kernels::batch_norm_statistics(x.data(), shape, mean.data(), variance.data(), mean_sum.data(),
                                   variance_sum.data(), factor.data(), fraction, correction,
                                   scratch.data(), nullptr);
    std::vector<double> sums_want(c.channels), variance_sums_want(c.channels);
    for (int64_t ch = 0; ch < c.channels; ++ch) {
      sums_want[ch] = 0.9 * 0.5 + mean_want[ch];
      variance_sums_want[ch] = 0.9 * 0.25 + static_cast<double>(correction) * variance_want[ch];
    }
    EXPECT_TRUE(close_to(mean_sum, sums_want, 1e-5, 1e-5)) << "running mean sums";
    EXPECT_TRUE(close_to(variance_sum, variance_sums_want, 1e-4, 1e-4)) << "running variance sums";
    EXPECT_TRUE(close_to(factor, {2 * 0.9 + 1}, 1e-6, 1e-6)) << "factor";
  }
  EXPECT_TRUE(close_to(mean, mean_want, 1e-5, 1e-5)) << "mean";
  EXPECT_TRUE(close_to(variance, variance_want, 1e-4, 1e-4)) << "variance";

  const std::vector<T> scale = uniform<T>(c.channels, 0.5, 2, 5),
                       bias = uniform<T>(c.channels, -1, 1, 6);
  kernels::ScaleInside<T> inside;
  if (c.scale) inside = {scale.data(), c.bias ? bias.data() : nullptr, nullptr, nullptr, c.relu};
  const T eps = T(1e-5);
  std::vector<T> inv_std(c.channels), y(n), x_norm(n);
  kernels::batch_norm_normalize(x.data(), shape, mean.data(), variance.data(), eps, inv_std.data(),
                                y.data(), x_norm.data(), inside, nullptr);
  std::vector<double> x_norm_want(n), y_want(n);
  for (int64_t k = 0; k < n; ++k) {
    const int64_t ch = (k / c.spatial) % c.channels;
    const double v = (x[k] - static_cast<double>(mean[ch])) /
                     std::sqrt(static_cast<double>(variance[ch]) + static_cast<double>(eps));
    x_norm_want[k] = v;
    y_want[k] = c.scale ? v * scale[ch] + (c.bias ? bias[ch] : 0.0) : v;
    if (c.scale && c.relu && y_want[k] < 0) y_want[k] = 0;
  }
  EXPECT_TRUE(close_to(x_norm, x_norm_want, 1e-4, 1e-4)) << "x_norm";
  EXPECT_TRUE(close_to(y, y_want, 1e-4, 1e-4)) << "y";

  const std::vector<T> dy = uniform<T>(n, -1, 1, 7);
  std::vector<T> dx(n, T(99)), scale_diff(c.channels, T(0.25)), bias_diff(c.channels, T(0.5));
  kernels::ScaleInside<T> backward;
  if (c.scale)
    backward = {scale.data(), nullptr, scale_diff.data(), c.bias ? bias_diff.data() : nullptr};
  kernels::batch_norm_backward(dy.data(), x_norm.data(), inv_std.data(), shape, c.global, backward,
                               dx.data(), scratch.data(), nullptr);
  std::vector<double> g_sum(c.channels), g_xn_sum(c.channels), dy_sum(c.channels),
      dy_xn_sum(c.channels), dx_want(n), scale_diff_want(c.channels), bias_diff_want(c.channels);
  const auto gradient = [&](int64_t k) {  // the Scale's input gradient, in T as the kernel has it
    const int64_t ch = (k / c.spatial) % c.channels;
    return static_cast<double>(c.scale ? dy[k] * scale[ch] : dy[k]);
  };
  for (int64_t k = 0; k < n; ++k) {
    const int64_t ch = (k / c.spatial) % c.channels;
    g_sum[ch] += gradient(k);
    g_xn_sum[ch] += gradient(k) * x_norm[k];
    dy_sum[ch] += dy[k];
    dy_xn_sum[ch] += static_cast<double>(dy[k] * x_norm[k]);
  }
  for (int64_t k = 0; k < n; ++k) {
    const int64_t ch = (k / c.spatial) % c.channels;
    const double centered =
        c.global ? gradient(k)
                 : gradient(k) - g_sum[ch] / per_channel - x_norm[k] * g_xn_sum[ch] / per_channel;
    dx_want[k] = centered * inv_std[ch];
  }
  EXPECT_TRUE(close_to(dx, dx_want, 1e-4, 1e-4)) << "dx";
  if (c.scale) {
    for (int64_t ch = 0; ch < c.channels; ++ch) {
      scale_diff_want[ch] = 0.25 + dy_xn_sum[ch];
      bias_diff_want[ch] = 0.5 + (c.bias ? dy_sum[ch] : 0.0);
    }
    EXPECT_TRUE(close_to(scale_diff, scale_diff_want, 1e-4, 1e-4)) << "the Scale's diff";
    EXPECT_TRUE(close_to(bias_diff, bias_diff_want, 1e-4, 1e-4)) << "the bias' diff";
  }
  EXPECT_TRUE(scratch.guard_intact()) << "a kernel wrote past the scratch it asked for";
}

TEST_P(BatchNorm, StatisticsNormalizeAndBackwardMatchFloat64) {
  if (GetParam().f64)
    check_batch_norm<double>(GetParam());
  else
    check_batch_norm<float>(GetParam());
}

// Planes shorter than a block (flat loops, threads across images in the sums) and longer (tiles
// of 1024, several slices of images, the last one shorter), global statistics, a Scale inside
// with and without bias and ReLU, float64.
INSTANTIATE_TEST_SUITE_P(Kernels, BatchNorm,
                         testing::Values(BatchNormCase{4, 3, 25}, BatchNormCase{4, 3, 25, true},
                                         BatchNormCase{9, 2, 1920}, BatchNormCase{33, 2, 1000},
                                         BatchNormCase{80, 2, 225, false, true, true, true},
                                         BatchNormCase{80, 2, 225, false, true, false, false, true},
                                         BatchNormCase{6, 5, 1, false, true, true},
                                         BatchNormCase{3, 2, 1920, true, true, true, true},
                                         BatchNormCase{40, 3, 300, false, true, true},
                                         BatchNormCase{2, 37, 2, false, true, true}),
                         NameOfCase());

// ---- Scale (scale.cu) ----

struct ScaleCase {
  int64_t outer, dim, inner;
  bool bias = true, dx = true, f64 = false;
};

std::string describe(const ScaleCase& c) {
  return cat(c.outer, "x", c.dim, "x", c.inner, c.bias ? "_bias" : "", c.dx ? "" : "_no_dx",
             c.f64 ? "_f64" : "");
}
void PrintTo(const ScaleCase& c, std::ostream* out) {
  *out << describe(c);
}

class Scale : public testing::TestWithParam<ScaleCase> {};

template <typename T>
void check_scale(const ScaleCase& c) {
  const int64_t n = c.outer * c.dim * c.inner;
  const kernels::ScaleShape shape{c.outer, c.dim, c.inner};
  const std::vector<T> x = uniform<T>(n, -1, 1, 8), dy = uniform<T>(n, -1, 1, 9),
                       scale = uniform<T>(c.dim, -1, 1, 10), bias = uniform<T>(c.dim, -1, 1, 11);
  std::vector<T> y(n), dx(n, T(7)), scale_diff(c.dim, T(1)), bias_diff(c.dim, T(2));
  GuardedScratch scratch(kernels::scale_scratch_bytes(shape));
  kernels::scale_forward(x.data(), scale.data(), c.bias ? bias.data() : nullptr, shape, y.data(),
                         nullptr);
  kernels::scale_backward(x.data(), dy.data(), scale.data(), shape, scale_diff.data(),
                          c.bias ? bias_diff.data() : nullptr, c.dx ? dx.data() : nullptr,
                          scratch.data(), nullptr);
  std::vector<double> y_want(n), scale_diff_want(c.dim, 1.0), bias_diff_want(c.dim, 2.0);
  std::vector<T> dx_want(n, T(7));
  for (int64_t k = 0; k < n; ++k) {
    const int64_t d = (k / c.inner) % c.dim;
    y_want[k] = static_cast<double>(x[k]) * scale[d] + (c.bias ? bias[d] : 0.0);
    if (c.dx) dx_want[k] = dy[k] * scale[d];
    scale_diff_want[d] += static_cast<double>(dy[k] * x[k]);
    if (c.bias) bias_diff_want[d] += dy[k];
  }
  EXPECT_TRUE(close_to(y, y_want, 1e-6, 1e-6)) << "y";
  EXPECT_TRUE(same_bits(dx, dx_want)) << "dx";
  EXPECT_TRUE(close_to(scale_diff, scale_diff_want, 1e-5, 1e-5)) << "scale diff";
  EXPECT_TRUE(close_to(bias_diff, bias_diff_want, 1e-5, 1e-5)) << "bias diff";
  EXPECT_TRUE(scratch.guard_intact()) << "a kernel wrote past the scratch it asked for";
}

TEST_P(Scale, ForwardAndGradientsMatchFloat64) {
  if (GetParam().f64)
    check_scale<double>(GetParam());
  else
    check_scale<float>(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Kernels, Scale,
                         testing::Values(ScaleCase{2, 3, 16}, ScaleCase{9, 2, 1920},
                                         ScaleCase{1, 6, 4, false, true, true}, ScaleCase{50, 7, 1},
                                         ScaleCase{40, 3, 300, false},
                                         ScaleCase{3, 4, 300, true, false}),
                         NameOfCase());

// ---- MAX and AVE pooling (pooling.cu, layers/pool_window_code.hpp) ----

struct PoolingCase {
  kernels::PoolShape shape;
  int code_bytes;
  bool ties;  // inputs in steps of 0.5: windows with equal maxima (the first one wins)
};

std::string describe(const PoolingCase& c) {
  const kernels::PoolShape& s = c.shape;
  return cat(s.planes, "x", s.height, "x", s.width, "_k", s.kernel_h, "x", s.kernel_w, "_s",
             s.stride_h, "x", s.stride_w, "_p", s.pad_h, "x", s.pad_w, "_u", 8 * c.code_bytes,
             c.ties ? "_ties" : "");
}
void PrintTo(const PoolingCase& c, std::ostream* out) {
  *out << describe(c);
}

class Pooling : public testing::TestWithParam<PoolingCase> {};

template <typename Code>
void check_pooling(const PoolingCase& c) {
  const kernels::PoolShape& s = c.shape;
  const int64_t plane = s.height * s.width, inputs = s.planes * plane,
                outputs = s.planes * s.pooled_h * s.pooled_w;
  std::vector<float> in = uniform(inputs, -1, 1, 12);
  if (c.ties)
    for (float& v : in) v = std::round(v * 2) / 2;
  std::fill(in.begin(), in.begin() + plane, -INFINITY);  // plane 0: no element beats -FLT_MAX
  const std::vector<float> out_diff = uniform(outputs, -1, 1, 13);
  std::vector<float> out(outputs), ave(outputs), in_diff(inputs, 5.f), ave_in_diff(inputs, 5.f);
  std::vector<Code> codes(outputs);
  kernels::max_pool_forward(in.data(), out.data(), codes.data(), s, nullptr);
  kernels::max_pool_backward(out_diff.data(), codes.data(), in_diff.data(), s, nullptr);
  kernels::ave_pool_forward(in.data(), ave.data(), s, nullptr);
  kernels::ave_pool_backward(out_diff.data(), ave_in_diff.data(), s, nullptr);

  // The CPU layer's loops: first maximum in row-major order; gradients scattered in output order.
  const pool::CodeGeometry g{s.width,    s.kernel_h, s.kernel_w, s.stride_h,
                             s.stride_w, s.pad_h,    s.pad_w};
  std::vector<float> out_want(outputs), in_diff_want(inputs, 0.f), ave_in_diff_want(inputs, 0.f);
  std::vector<Code> codes_want(outputs);
  std::vector<double> ave_want(outputs);
  for (int64_t p = 0; p < s.planes; ++p)
    for (int64_t ph = 0; ph < s.pooled_h; ++ph)
      for (int64_t pw = 0; pw < s.pooled_w; ++pw) {
        const int64_t hs = ph * s.stride_h - s.pad_h, ws = pw * s.stride_w - s.pad_w;
        const int64_t he = std::min(hs + s.kernel_h, s.height + s.pad_h);
        const int64_t we = std::min(ws + s.kernel_w, s.width + s.pad_w);
        const int64_t divisor = (he - hs) * (we - ws);
        const int64_t o = (p * s.pooled_h + ph) * s.pooled_w + pw;
        float best = -FLT_MAX;
        int64_t at = -1;
        double sum = 0;
        for (int64_t h = std::max<int64_t>(hs, 0); h < std::min(he, s.height); ++h)
          for (int64_t w = std::max<int64_t>(ws, 0); w < std::min(we, s.width); ++w) {
            const float v = in[p * plane + h * s.width + w];
            if (v > best) best = v, at = h * s.width + w;
            sum += v;
            ave_in_diff_want[p * plane + h * s.width + w] +=
                out_diff[o] / static_cast<float>(divisor);
          }
        out_want[o] = best;
        codes_want[o] = at < 0 ? pool::kNone<Code> : pool::encode_position<Code>(at, ph, pw, g);
        EXPECT_EQ(pool::decode<Code>(codes[o], ph, pw, g), at) << "output " << o;
        if (at >= 0) in_diff_want[p * plane + at] += out_diff[o];
        ave_want[o] = sum / static_cast<double>(divisor);
      }
  EXPECT_TRUE(same_bits(out, out_want)) << "max";
  EXPECT_TRUE(same_bits(codes, codes_want)) << "max's codes";
  EXPECT_TRUE(same_bits(in_diff, in_diff_want)) << "max's input gradient";
  EXPECT_TRUE(close_to(ave, ave_want, 1e-6, 1e-5)) << "ave";
  EXPECT_TRUE(same_bits(ave_in_diff, ave_in_diff_want)) << "ave's input gradient";
}

TEST_P(Pooling, MaxAndAveMatchTheCpuLayersLoops) {
  switch (GetParam().code_bytes) {
    case 1:
      return check_pooling<uint8_t>(GetParam());
    case 2:
      return check_pooling<uint16_t>(GetParam());
    default:
      return check_pooling<uint32_t>(GetParam());
  }
}

// Windows past the input's end (Caffe's ceil), padding, a window as large as the plane (2-byte
// codes), 4-byte codes, a padded window wider than the plane.
INSTANTIATE_TEST_SUITE_P(Kernels, Pooling,
                         testing::Values(PoolingCase{{6, 8, 8, 4, 4, 3, 3, 2, 2, 0, 0}, 1, true},
                                         PoolingCase{{6, 9, 9, 5, 5, 3, 3, 2, 2, 1, 1}, 1, true},
                                         PoolingCase{{4, 8, 7, 4, 4, 2, 2, 2, 2, 0, 0}, 1, true},
                                         PoolingCase{
                                             {4, 17, 16, 1, 1, 17, 16, 1, 1, 0, 0}, 2, false},
                                         PoolingCase{{2, 5, 6, 3, 3, 3, 2, 2, 3, 1, 1}, 4, true},
                                         PoolingCase{{3, 3, 2, 3, 2, 3, 3, 1, 1, 1, 1}, 1, false}),
                         NameOfCase());

// ---- LRN (lrn.cu, layers/lrn_column.hpp) ----

struct LrnCase {
  kernels::LrnShape shape;
  bool columns;  // lrn_across_forward/backward (nothing kept) rather than the kept scale
};

std::string describe(const LrnCase& c) {
  const kernels::LrnShape& s = c.shape;
  return cat(s.num, "x", s.channels, "x", s.height, "x", s.width, "_size", s.size,
             s.across ? "_across" : "_within", c.columns ? "_columns" : "_kept_scale");
}
void PrintTo(const LrnCase& c, std::ostream* out) {
  *out << describe(c);
}

class Lrn : public testing::TestWithParam<LrnCase> {};

TEST_P(Lrn, ForwardAndBackwardMatchFloat64) {
  const auto [s, columns] = GetParam();
  const int64_t n = s.num * s.channels * s.height * s.width, plane = s.height * s.width;
  const std::vector<float> x = uniform(n, -2, 2, 14), dy = uniform(n, -1, 1, 15);
  const float alpha_over_n = 0.5f / static_cast<float>(s.size), k = 2.f, beta = 0.75f;
  std::vector<float> y(n), dx(n), scale(n), work(n);
  if (columns) {
    kernels::lrn_across_forward(x.data(), y.data(), s, alpha_over_n, k, beta, nullptr);
    kernels::lrn_across_backward(x.data(), dy.data(), dx.data(), s, alpha_over_n, k, beta, nullptr);
  } else {
    kernels::lrn_forward(x.data(), scale.data(), y.data(), s, alpha_over_n, k, beta, nullptr);
    kernels::lrn_backward(x.data(), scale.data(), dy.data(), work.data(), dx.data(), s,
                          alpha_over_n, beta, nullptr);
  }
  const int64_t half = (s.size - 1) / 2;
  const auto window_sum = [&](auto value, int64_t i) {  // across channels, or a square
    const int64_t j = i % plane, c = i / plane % s.channels;
    double sum = 0;
    if (s.across) {
      for (int64_t m = std::max<int64_t>(0, c - half); m <= std::min(s.channels - 1, c + half); ++m)
        sum += value(i + (m - c) * plane);
      return sum;
    }
    const int64_t h = j / s.width, w = j % s.width;
    for (int64_t a = std::max<int64_t>(0, h - half); a <= std::min(s.height - 1, h + half); ++a)
      for (int64_t b = std::max<int64_t>(0, w - half); b <= std::min(s.width - 1, w + half); ++b)
        sum += value(i - j + a * s.width + b);
    return sum;
  };
  std::vector<double> scale_want(n), y_want(n), ratio(n), dx_want(n);
  for (int64_t i = 0; i < n; ++i) {
    scale_want[i] =
        k + alpha_over_n * window_sum([&](int64_t e) { return double{x[e]} * x[e]; }, i);
    y_want[i] = x[i] * std::pow(scale_want[i], -beta);
    ratio[i] = dy[i] * y_want[i] / scale_want[i];
  }
  for (int64_t i = 0; i < n; ++i)
    dx_want[i] =
        dy[i] * std::pow(scale_want[i], -beta) -
        2 * alpha_over_n * beta * x[i] * window_sum([&](int64_t e) { return ratio[e]; }, i);
  EXPECT_TRUE(close_to(y, y_want, 1e-5, 1e-5)) << "y";
  EXPECT_TRUE(close_to(dx, dx_want, 1e-5, 1e-5)) << "dx";
  if (!columns) {
    EXPECT_TRUE(close_to(scale, scale_want, 1e-5, 1e-5)) << "the kept scale";
    return;
  }
  // From a bf16 copy of x: the same as from its widened values.
  std::vector<uint16_t> x_bf16(n);
  std::vector<float> x_widened(n), dx_wide(n), dx_bf16(n, 3.f);
  narrow_to_precision(Precision::kBf16, x.data(), x_bf16.data(), n);
  widen_from_precision(Precision::kBf16, x_bf16.data(), x_widened.data(), n);
  kernels::lrn_across_backward(x_widened.data(), dy.data(), dx_wide.data(), s, alpha_over_n, k,
                               beta, nullptr);
  kernels::lrn_across_backward_bf16(x_bf16.data(), dy.data(), dx_bf16.data(), s, alpha_over_n, k,
                                    beta, nullptr);
  EXPECT_TRUE(same_bits(dx_bf16, dx_wide)) << "lrn_across_backward_bf16";
}

// Windows across channels up to lrn::kMaxColumnWindow (a column per thread) and beyond it (the
// kept scale), and within a channel.
INSTANTIATE_TEST_SUITE_P(Kernels, Lrn,
                         testing::Values(LrnCase{{2, 7, 4, 4, 5, true}, true},
                                         LrnCase{{2, 20, 3, 3, 15, true}, true},
                                         LrnCase{{2, 20, 3, 3, 17, true}, false},
                                         LrnCase{{2, 3, 6, 5, 3, false}, false},
                                         LrnCase{{2, 7, 4, 4, 5, true}, false}),
                         NameOfCase());

// ---- leaky ReLU (relu.cu) ----

template <typename T>
void check_relu(T slope) {
  std::vector<T> x = uniform<T>(1000, -3, 3, 16);
  const std::vector<T> dy = uniform<T>(x.size(), -1, 1, 17);
  const T specials[] = {T(0),
                        -T(0),
                        std::numeric_limits<T>::quiet_NaN(),
                        std::numeric_limits<T>::infinity(),
                        -std::numeric_limits<T>::infinity(),
                        std::numeric_limits<T>::denorm_min(),
                        -std::numeric_limits<T>::denorm_min()};
  std::copy(std::begin(specials), std::end(specials), x.begin());
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<T> y(n), dx(n), y_want(n), dx_want(n);
  for (int64_t k = 0; k < n; ++k) {  // the CPU layer's expressions
    y_want[k] = std::max(x[k], T(0)) + slope * std::min(x[k], T(0));
    dx_want[k] = dy[k] * (T(x[k] > 0) + slope * T(x[k] <= 0));
  }
  kernels::relu_forward(x.data(), y.data(), n, slope, nullptr);
  kernels::relu_backward(x.data(), dy.data(), dx.data(), n, slope, nullptr);
  // Equal values, not bits: a contracted multiply-add (nvcc's, and the compiler's here) makes
  // -0 of what is +0 rounded twice, for a negative x whose product underflows.
  std::vector<double> y_values(y_want.begin(), y_want.end());
  EXPECT_TRUE(close_to(y, y_values, 0.0, 0.0)) << "relu_forward, slope " << slope;
  EXPECT_TRUE(same_bits(dx, dx_want, true)) << "relu_backward, slope " << slope;
}

TEST(Relu, ForwardAndBackwardAreTheCpuLayersExpressions) {
  check_relu<float>(0.1f);
  check_relu<float>(0.f);
  check_relu<double>(0.25);
}

TEST(Relu, PackedBackwardReadsTheSignOfEveryBf16AndFp16Number) {
  std::vector<uint16_t> all(65536);
  std::iota(all.begin(), all.end(), uint16_t{0});
  const std::vector<float> dy = uniform(65536, -1, 1, 18);
  for (const Precision precision : {Precision::kBf16, Precision::kFp16})
    for (const float slope : {0.1f, 0.f}) {
      const uint16_t infinity = infinity_bits(precision);
      std::vector<float> dx(65536, 7.f), dx_want(65536);
      for (int k = 0; k < 65536; ++k)
        dx_want[k] = read_positive(all[k], infinity) ? dy[k] : slope == 0.f ? 0.f : slope * dy[k];
      kernels::relu_backward_packed(all.data(), infinity, dy.data(), dx.data(), 65536, slope,
                                    nullptr);
      EXPECT_TRUE(same_bits(dx, dx_want)) << to_string(precision) << ", slope " << slope;
    }
}

// ---- fixed-order sums of buffers (sum.cu) ----

TEST(Sum, BuffersAddInTheHostSumsTreeOrder) {
  constexpr int64_t n = 1000;
  std::vector<std::vector<float>> buffers;
  std::mt19937_64 rng(19);
  std::uniform_real_distribution<float> mantissa(-1.f, 1.f);
  std::uniform_int_distribution<int> exponent(-20, 20);  // sums that round: the order shows
  for (int k = 0; k < 33; ++k) {
    buffers.emplace_back(n);
    for (float& v : buffers.back()) v = std::ldexp(mantissa(rng), exponent(rng));
  }
  for (const int count : {0, 1, 2, 3, 4, 5, 6, 7, 32}) {
    SCOPED_TRACE(cat(count, " sources"));
    std::vector<const float*> sources;
    for (int k = 0; k < count; ++k) sources.push_back(buffers[k].data());
    std::vector<float> sum(n, 9.f), sum_want(n);
    cgdp::sum_buffers(sum_want.data(), sources, n, 1);
    kernels::sum_buffers(sum.data(), sources.data(), count, n, nullptr);
    EXPECT_TRUE(same_bits(sum, sum_want));
  }
  std::vector<float> in_place = buffers[0], in_place_want(n);
  const float* sources[] = {in_place.data(), buffers[1].data(), buffers[2].data(),
                            buffers[3].data()};
  cgdp::sum_buffers(in_place_want.data(), sources, n, 1);
  kernels::sum_buffers(in_place.data(), sources, 4, n, nullptr);
  EXPECT_TRUE(same_bits(in_place, in_place_want)) << "into its first source";

  std::vector<const float*> too_many(33, buffers[0].data());
  std::vector<float> sum(n);
  EXPECT_THROW(kernels::sum_buffers(sum.data(), too_many.data(), 33, n, nullptr),
               std::invalid_argument);
}

// ---- the 16-bit exchange's scale (exchange_codec.cu) ----

TEST(ExchangeCodec, MaxAbsIsTheLargestMagnitudeWithNaNsPassedOver) {
  std::vector<float> x = uniform(5000, -3, 2, 20);
  x[4321] = -7.5f;
  float largest = 0.f;
  kernels::max_abs(x.data(), static_cast<int64_t>(x.size()), &largest, nullptr);
  EXPECT_EQ(largest, cgdp::max_abs(x.data(), static_cast<int64_t>(x.size())));
  EXPECT_EQ(largest, 7.5f);

  x[17] = std::numeric_limits<float>::quiet_NaN();
  x[18] = -std::numeric_limits<float>::quiet_NaN();
  float with_nans = 0.f, already_larger = 9.f;
  kernels::max_abs(x.data(), static_cast<int64_t>(x.size()), &with_nans, nullptr);
  kernels::max_abs(x.data(), static_cast<int64_t>(x.size()), &already_larger, nullptr);
  EXPECT_EQ(with_nans, 7.5f);
  EXPECT_EQ(already_larger, 9.f);
}

TEST(ExchangeCodec, Fp16ScaleIsTheCpusForEveryMagnitude) {
  std::vector<float> maxima = {
      0.f,     -0.f,  1e-45f,  1e-30f,   0x1p-113f,
      1e-8f,   0.75f, 1.f,     1.5f,     16384.f,
      65504.f, 1e30f, FLT_MAX, INFINITY, std::numeric_limits<float>::quiet_NaN()};
  for (int e = -40; e <= 40; e += 3) maxima.push_back(std::ldexp(1.3f, e));
  for (const float m : maxima) {
    float value = m;
    kernels::fp16_scale_from_max(&value, nullptr);
    EXPECT_EQ(std::bit_cast<uint32_t>(value), std::bit_cast<uint32_t>(fp16_scale_for(m)))
        << "max " << m << ": " << value << " vs " << fp16_scale_for(m);
  }
}

// ---- class labels (class_labels.cu): the first bad one, by atomicMin across blocks ----

template <typename T>
void check_decode_labels() {
  constexpr int64_t kClasses = 10, kIgnore = 7, n = 3000;  // 12 blocks
  std::vector<T> labels(n);
  for (int64_t k = 0; k < n; ++k) labels[k] = static_cast<T>(k % kClasses);
  const std::pair<int64_t, T> bad[] = {{2950, T(2.5)},
                                       {1500, std::numeric_limits<T>::quiet_NaN()},
                                       {900, T(kClasses)},
                                       {2999, T(-3)},
                                       {1200, std::numeric_limits<T>::infinity()}};
  for (const auto& [at, value] : bad) labels[at] = value;
  std::vector<int64_t> out(n, 99), want(n);
  for (int64_t k = 0; k < n; ++k) {
    const T v = labels[k];
    const bool integral = std::isfinite(v) && std::floor(v) == v;
    const int64_t label = integral ? static_cast<int64_t>(v) : -1;
    want[k] = integral && label != kIgnore && label >= 0 && label < kClasses ? label : -1;
  }
  kernels::LabelError error{0, 0.0};
  kernels::decode_labels(labels.data(), {1, kClasses, n}, true, kIgnore, out.data(), &error,
                         nullptr);
  EXPECT_TRUE(same_bits(out, want));
  EXPECT_EQ(error.position, 900u);
  EXPECT_EQ(error.value, static_cast<double>(kClasses));

  for (const auto& [at, value] : bad) labels[at] = T(1);
  kernels::decode_labels(labels.data(), {1, kClasses, n}, true, kIgnore, out.data(), &error,
                         nullptr);
  EXPECT_EQ(error.position, kernels::kNoLabelError);
}

TEST(ClassLabels, DecodingMarksBadLabelsAndRecordsTheFirst) {
  check_decode_labels<float>();
  check_decode_labels<double>();
}

// ---- the solver rules and the clip's sum of squares (solver_update.cu) ----

class SolverUpdate : public testing::TestWithParam<kernels::Rule> {};

TEST_P(SolverUpdate, OneStepMatchesFloat64) {
  constexpr int64_t n = 1000;
  kernels::RuleScalars k;
  k.rule = GetParam();
  k.grad_scale = 0.5;
  k.lr = 0.01;
  k.decay = 0.001;
  k.momentum = 0.9;
  k.adam_rate = 0.01 * std::sqrt(1 - 0.999 * 0.999) / (1 - 0.9 * 0.9);
  std::vector<float> data = uniform(n, -1, 1, 21), history = uniform(n, 0, 1, 23),
                     history2 = uniform(n, 0, 1, 24);
  const std::vector<float> diff = uniform(n, -1, 1, 22);
  std::vector<double> data_want(n), history_want(n), history2_want(n);
  for (int64_t i = 0; i < n; ++i) {  // update_rule.hpp's formulas
    const double g = static_cast<float>(diff[i] * k.grad_scale) + k.decay * data[i];
    double h = history[i], h2 = history2[i], update = 0;
    const double m = k.momentum;
    switch (k.rule) {
      case kernels::Rule::kSgd:
        update = h = m * h + k.lr * g;
        break;
      case kernels::Rule::kNesterov:
        update = (1 + m) * (m * h + k.lr * g) - m * h;
        h = m * h + k.lr * g;
        break;
      case kernels::Rule::kAdaGrad:
        h += g * g;
        update = k.lr * g / (std::sqrt(h) + k.delta);
        break;
      case kernels::Rule::kRmsProp:
        h = k.rms_decay * h + (1 - k.rms_decay) * g * g;
        update = k.lr * g / (std::sqrt(h) + k.delta);
        break;
      case kernels::Rule::kAdaDelta: {
        h = m * h + (1 - m) * g * g;
        const double u = g * std::sqrt((h2 + k.delta) / (h + k.delta));
        h2 = m * h2 + (1 - m) * u * u;
        update = k.lr * u;
        break;
      }
      case kernels::Rule::kAdam:
        h = m * h + (1 - m) * g;
        h2 = k.momentum2 * h2 + (1 - k.momentum2) * g * g;
        update = k.adam_rate * h / (std::sqrt(h2) + k.delta);
        break;
    }
    data_want[i] = data[i] - update;
    history_want[i] = h;
    history2_want[i] = h2;
  }
  kernels::solver_update(data.data(), diff.data(), history.data(), history2.data(), n, k, nullptr);
  EXPECT_TRUE(close_to(data, data_want, 1e-6, 1e-5)) << "data";
  EXPECT_TRUE(close_to(history, history_want, 1e-6, 1e-5)) << "history";
  EXPECT_TRUE(close_to(history2, history2_want, 1e-6, 1e-5)) << "history2";
}

INSTANTIATE_TEST_SUITE_P(Kernels, SolverUpdate,
                         testing::Values(kernels::Rule::kSgd, kernels::Rule::kNesterov,
                                         kernels::Rule::kAdaGrad, kernels::Rule::kRmsProp,
                                         kernels::Rule::kAdaDelta, kernels::Rule::kAdam),
                         NameOfCase());

TEST(SumSquares, AddsEveryElementOnceInFloat64) {
  // Small integers: every square and sum exact, so any order gives the one answer. More elements
  // than the fixed grid's threads (each strides), and the last ones alone in their block.
  const int64_t n = int64_t{kernels::kSumSquaresBlocks} * kernels::kReduceThreads * 3 + 101;
  std::vector<float> x(n);
  double want = 0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = static_cast<float>(i % 23) - 11;
    want += static_cast<double>(x[i]) * x[i];
  }
  std::vector<double> out(kernels::kSumSquaresBlocks + 1, -1.0);
  kernels::sum_squares(x.data(), n, out.data(), nullptr);
  EXPECT_EQ(out[0], want);
}

// ---- PReLU and MVN: a block per slope or row (prelu.cu, mvn.cu) ----

class PRelu : public testing::TestWithParam<bool> {};

TEST_P(PRelu, ForwardAndGradientsMatchFloat64) {
  const kernels::PReLUShape s{3, 4, 300, GetParam()};
  const int64_t n = s.outer * s.channels * s.inner, slopes = s.shared ? 1 : s.channels;
  const std::vector<float> x = uniform(n, -1, 1, 25), dy = uniform(n, -1, 1, 26),
                           a = uniform(slopes, 0, 0.5, 27);
  std::vector<float> y(n), dx(n), da(slopes, 0.5f), y_want(n), dx_want(n);
  std::vector<double> da_want(slopes, 0.5);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t c = s.shared ? 0 : (i / s.inner) % s.channels;
    y_want[i] = std::max(x[i], 0.f) + a[c] * std::min(x[i], 0.f);
    dx_want[i] = x[i] > 0.f ? dy[i] : a[c] * dy[i];
    if (x[i] <= 0.f) da_want[c] += static_cast<double>(dy[i]) * x[i];
  }
  kernels::prelu_forward(x.data(), a.data(), s, y.data(), nullptr);
  kernels::prelu_backward(x.data(), dy.data(), a.data(), s, da.data(), dx.data(), nullptr);
  EXPECT_TRUE(close_to(y, std::vector<double>(y_want.begin(), y_want.end()), 0.0, 0.0)) << "y";
  EXPECT_TRUE(same_bits(dx, dx_want)) << "dx";
  EXPECT_TRUE(close_to(da, da_want, 1e-6, 1e-6)) << "da";
}

INSTANTIATE_TEST_SUITE_P(Kernels, PRelu, testing::Bool(),
                         [](const testing::TestParamInfo<bool>& info) {
                           return std::string(info.param ? "shared" : "per_channel");
                         });

struct MvnCase {
  int64_t rows, dim;
  bool variance;
};

std::string describe(const MvnCase& c) {
  return cat(c.rows, "x", c.dim, c.variance ? "_variance" : "");
}
void PrintTo(const MvnCase& c, std::ostream* out) {
  *out << describe(c);
}

class Mvn : public testing::TestWithParam<MvnCase> {};

TEST_P(Mvn, ForwardAndBackwardMatchFloat64) {
  const auto [rows, dim, variance] = GetParam();
  const double eps = 1e-9;
  const std::vector<float> x = uniform(rows * dim, -2, 3, 28), dy = uniform(rows * dim, -1, 1, 29);
  std::vector<float> y(rows * dim), scale(rows), dx(rows * dim);
  kernels::mvn_forward(x.data(), rows, dim, variance, eps, y.data(), scale.data(), nullptr);
  kernels::mvn_backward(y.data(), dy.data(), scale.data(), rows, dim, variance, dx.data(), nullptr);
  std::vector<double> y_want(rows * dim), scale_want(rows), dx_want(rows * dim);
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0, squares = 0, mean_dy = 0, mean_ydy = 0;
    for (int64_t i = 0; i < dim; ++i) mean += x[r * dim + i] / static_cast<double>(dim);
    for (int64_t i = 0; i < dim; ++i) squares += std::pow(x[r * dim + i] - mean, 2);
    scale_want[r] = variance ? std::sqrt(squares / dim) + eps : 1.0;
    for (int64_t i = 0; i < dim; ++i) {
      y_want[r * dim + i] = (x[r * dim + i] - mean) / scale_want[r];
      mean_dy += dy[r * dim + i] / static_cast<double>(dim);
      mean_ydy += static_cast<double>(y[r * dim + i]) * dy[r * dim + i] / static_cast<double>(dim);
    }
    for (int64_t i = 0; i < dim; ++i) {
      const int64_t k = r * dim + i;
      dx_want[k] = variance ? (dy[k] - mean_dy - y[k] * mean_ydy) / scale[r] : dy[k] - mean_dy;
    }
  }
  EXPECT_TRUE(close_to(y, y_want, 1e-5, 1e-5)) << "y";
  EXPECT_TRUE(close_to(scale, scale_want, 1e-5, 1e-5)) << "scale";
  EXPECT_TRUE(close_to(dx, dx_want, 1e-5, 1e-5)) << "dx";
}

// Rows longer than the block (threads stride) and shorter, with and without the variance.
INSTANTIATE_TEST_SUITE_P(Kernels, Mvn,
                         testing::Values(MvnCase{5, 300, true}, MvnCase{5, 300, false},
                                         MvnCase{3, 7, true}),
                         NameOfCase());

// ---- the emulator itself ----

TEST(KernelEmulator, BlockSumAddsEveryThreadsValueAcrossItsBarriers) {
  constexpr int kBlocks = 3;
  std::vector<double> values(kBlocks * kernels::kReduceThreads), want(kBlocks, 0.0);
  for (size_t i = 0; i < values.size(); ++i) {
    values[i] = static_cast<double>((i * 7919) % 1000) - 400;  // integers: exact in any order
    want[i / kernels::kReduceThreads] += values[i];
  }
  std::vector<double> sums(kBlocks, -1.0);
  emulator_probes::block_sums(values.data(), kBlocks, sums.data(), nullptr);
  EXPECT_EQ(sums, want);
}

TEST(KernelEmulator, BarriersNotReachedByEveryThreadFailNamingTheLaunch) {
  // The first thread of the forward order, of the reverse (the fast path's probe), or another.
  for (const unsigned skipping : {0u, 63u, 5u}) {
    SCOPED_TRACE(cat("thread ", skipping, " skips the barrier"));
    try {
      emulator_probes::barrier_skipped_by(skipping, 64, nullptr);
      ADD_FAILURE() << "no error";
    } catch (const std::logic_error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("divergent __syncthreads"), std::string::npos) << what;
      EXPECT_NE(what.find("barrier_kernel<<<(1,1,1), (64,1,1), 0>>> at "
                          "tests/kernel_emulation/emulator_probes.cu:"),
                std::string::npos)
          << what;
    }
  }
  std::vector<double> ones(kernels::kReduceThreads, 1.0), sum(1);  // and the next launch runs
  emulator_probes::block_sums(ones.data(), 1, sum.data(), nullptr);
  EXPECT_EQ(sum[0], kernels::kReduceThreads);
}

TEST(KernelEmulator, ThreadOrderIsTheEnvironmentsUntilSet) {
  const char* value = std::getenv("CGDP_EMULATED_THREAD_ORDER");
  const auto expected = value && std::string(value) == "reverse"
                            ? cgdp_emulation::ThreadOrder::kReverse
                            : cgdp_emulation::ThreadOrder::kForward;
  EXPECT_EQ(cgdp_emulation::thread_order(), expected)
      << "CGDP_EMULATED_THREAD_ORDER=" << (value ? value : "(unset)");
  const auto other = expected == cgdp_emulation::ThreadOrder::kForward
                         ? cgdp_emulation::ThreadOrder::kReverse
                         : cgdp_emulation::ThreadOrder::kForward;
  {
    const cgdp_emulation::ScopedThreadOrder scoped(other);
    EXPECT_EQ(cgdp_emulation::thread_order(), other);
  }
  EXPECT_EQ(cgdp_emulation::thread_order(), expected);
}

// A missing __syncthreads between a write and another thread's read: each order serves the read
// before or after the write for a different set of threads, so the two disagree; with the barrier
// both see every write. On the fast path (nothing before the exchange) and in fibers' rounds.
TEST(KernelEmulator, TheTwoThreadOrdersDisagreeOnAMissingBarrier) {
  using cgdp_emulation::ScopedThreadOrder;
  using cgdp_emulation::ThreadOrder;
  constexpr unsigned n = emulator_probes::kExchangeThreads;
  for (const bool after_barrier : {false, true}) {
    SCOPED_TRACE(after_barrier ? "after a barrier (fibers)" : "first thing (fast path)");
    std::vector<int> forward(n, -1), reverse(n, -1), synced_forward(n, -1), synced_reverse(n, -1);
    {
      const ScopedThreadOrder order(ThreadOrder::kForward);
      emulator_probes::neighbour_exchange(false, after_barrier, forward.data(), nullptr);
      emulator_probes::neighbour_exchange(true, after_barrier, synced_forward.data(), nullptr);
    }
    {
      const ScopedThreadOrder order(ThreadOrder::kReverse);
      emulator_probes::neighbour_exchange(false, after_barrier, reverse.data(), nullptr);
      emulator_probes::neighbour_exchange(true, after_barrier, synced_reverse.data(), nullptr);
    }
    EXPECT_NE(forward, reverse);
    // Forward: each thread reads its neighbour before it runs, but the last reads thread 0's.
    // Reverse: each reads a neighbour that ran already, but the last (run first) reads thread 0's.
    std::vector<int> forward_want(n, 0), reverse_want(n, 1);
    forward_want[n - 1] = 1;
    reverse_want[n - 1] = 0;
    EXPECT_EQ(forward, forward_want);
    EXPECT_EQ(reverse, reverse_want);
    EXPECT_EQ(synced_forward, std::vector<int>(n, 1));
    EXPECT_EQ(synced_reverse, std::vector<int>(n, 1));
  }
}

TEST(KernelEmulator, InvalidLaunchesAreReportedByCudaCheckLaunchWithTheirConfiguration) {
  struct Refused {
    dim3 grid, block;
    size_t shared;
    const char* error;
  };
  const Refused refused[] = {
      {dim3(1, 70000), dim3(1), 0, "invalid configuration argument"},
      {dim3(1, 1, 65536), dim3(1), 0, "invalid configuration argument"},
      {dim3(0), dim3(32), 0, "invalid configuration argument"},
      {dim3(2147483648u), dim3(1), 0, "invalid configuration argument"},
      {dim3(1), dim3(1025), 0, "invalid configuration argument"},
      {dim3(1), dim3(32, 32, 2), 0, "invalid configuration argument"},
      {dim3(1), dim3(1, 1, 65), 0, "invalid configuration argument"},
      {dim3(1), dim3(0), 0, "invalid configuration argument"},
      {dim3(1), dim3(32), 48 * 1024 + 1, "invalid argument"},
  };
  for (const Refused& r : refused) {
    const std::string configuration =
        cat("mark_kernel<<<(", r.grid.x, ",", r.grid.y, ",", r.grid.z, "), (", r.block.x, ",",
            r.block.y, ",", r.block.z, "), ", r.shared, ">>>");
    SCOPED_TRACE(configuration);
    int ran = 0;
    try {
      emulator_probes::launch_configured(r.grid, r.block, r.shared, &ran, nullptr);
      ADD_FAILURE() << "no error";
    } catch (const DeviceError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(cat(r.error, " (launch ", configuration, " at ")), std::string::npos)
          << what;
      EXPECT_NE(what.find("cudaGetLastError()"), std::string::npos) << what;
    }
    EXPECT_EQ(ran, 0);
  }
  // The limits themselves launch, and the errors were not sticky.
  for (const auto& [grid, block] : {std::pair{dim3(1, 65535), dim3(1)},
                                    {dim3(1, 1, 65535), dim3(1)},
                                    {dim3(1), dim3(1024)},
                                    {dim3(1), dim3(1, 16, 64)}}) {
    int ran = 0;
    emulator_probes::launch_configured(grid, block, 48 * 1024, &ran, nullptr);
    EXPECT_EQ(ran, 1);
  }

  // No wrapper makes a grid of 0 blocks: each returns before launching for 0 elements.
  const long before = cgdp_emulation::launch_count();
  kernels::narrow(nullptr, nullptr, 0, Half16::Bf16, nullptr, nullptr);
  kernels::transpose_to_channels_last(nullptr, nullptr, 0, 3, 4, nullptr);
  kernels::relu_forward<float>(nullptr, nullptr, 0, 0.f, nullptr);
  kernels::max_abs(nullptr, 0, nullptr, nullptr);
  kernels::ave_pool_forward<float>(nullptr, nullptr, kernels::PoolShape{}, nullptr);
  EXPECT_EQ(cgdp_emulation::launch_count(), before);
}

}  // namespace
}  // namespace cgdp
