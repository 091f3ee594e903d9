// 16-bit precision (issue 36): every multiplying layer in bf16 and fp16 against its fp32 twin,
// forward and backward, within what rounding its operands can change, on the CPU and (when there
// is a GPU) on CUDA; and the loss scale's state machine.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "cgdp/core/error.hpp"
#include "cgdp/device/cpu_device.hpp"
#include "cgdp/device/cuda_options.hpp"
#include "cgdp/device/devices.hpp"
#include "cgdp/device/layer_precision.hpp"
#include "cgdp/layers/convolution_layer.hpp"
#include "cgdp/layers/lrn_column.hpp"
#include "cgdp/layers/registry.hpp"
#include "cgdp/solver/loss_scale.hpp"
#include "cgdp/tensor/channel_blocks.hpp"
#include "support/layer_case.hpp"

namespace cgdp {
namespace {

using testing::Case;

// Sets the layers' precision for one scope.
class PrecisionScope {
 public:
  explicit PrecisionScope(Precision p) { set_layer_precision(p); }
  ~PrecisionScope() { set_layer_precision(Precision::kFp32); }
};

struct LayerRun {
  std::vector<float> out, in_diff, weight_diff, bias_diff;
};

struct Layer16Case {
  std::string name;  // the layer and its parameters, for the test's name
  std::string text;  // the layer's prototxt
  Shape bottom;
  int64_t longest_sum;  // the longest reduction among forward, data and weight gradients
};

// Failure messages name the case, not its bytes.
void PrintTo(const Layer16Case& c, std::ostream* os) {
  *os << c.name;
}

// The output gradient backward starts from, the same on every run.
std::vector<float> output_gradient(int64_t count, bool absolute) {
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> uniform(-1, 1);
  std::vector<float> v(static_cast<size_t>(count));
  for (float& x : v) x = absolute ? std::abs(uniform(gen)) : uniform(gen);
  return v;
}

template <typename V>
std::vector<V> to_host(const Blob<V>& blob, bool diff = false) {
  std::vector<V> v(static_cast<size_t>(blob.count()));
  blob.device().copy(v.data(), diff ? blob.diff() : blob.data(), blob.bytes());
  return v;
}

void upload(Blob<float>& blob, const std::vector<float>& values, bool diff = false) {
  ASSERT_EQ(static_cast<int64_t>(values.size()), blob.count());
  blob.device().copy(diff ? blob.mutable_diff() : blob.mutable_data(), values.data(), blob.bytes());
}

// One forward and backward of the layer from fixed inputs, on the CPU or (`gpu`: its device and
// stream) on CUDA: with `absolute`, every input, weight and output gradient is replaced by its
// magnitude, so the outputs are the sums of the terms' magnitudes that bound the rounding's error.
LayerRun run_layer(const Layer16Case& c, Precision precision, bool absolute, Device* gpu = nullptr,
                   Stream* gpu_stream = nullptr) {
  const PrecisionScope scope(precision);
  Case<float> h(c.text, {c.bottom}, 1);  // the same inputs and (seeded) weights every run
  h.setup();
  auto magnitudes = [&](float* v, int64_t n) {
    if (absolute)
      for (int64_t i = 0; i < n; ++i) v[i] = std::abs(v[i]);
  };
  magnitudes(h.bottom[0]->mutable_data(), h.bottom[0]->count());
  for (const auto& p : h.layer->params()) {
    magnitudes(p->mutable_data(), p->count());
    std::fill_n(p->mutable_diff(), p->count(), 0.25f);  // backward adds to it, as Caffe's layers
  }
  // On CUDA a twin of the layer takes the CPU layer's inputs and weights.
  std::unique_ptr<Layer<float>> cuda_layer;
  std::vector<std::unique_ptr<Blob<float>>> cuda_blobs;
  BlobVec<float> bottom = h.bottom, top = h.top;
  RunContext ctx;
  if (gpu) {
    cuda_layer = create_layer<float>(testing::parse_layer(c.text), *gpu);
    for (const Shape& shape : {c.bottom, Shape{}})
      cuda_blobs.push_back(std::make_unique<Blob<float>>(*gpu, shape));
    bottom = {cuda_blobs[0].get()};
    top = {cuda_blobs[1].get()};
    upload(*bottom[0], to_host(*h.bottom[0]));
    Rng rng(5);
    cuda_layer->setup(bottom, top, rng);
    for (size_t p = 0; p < h.layer->params().size(); ++p) {
      upload(*cuda_layer->params()[p], to_host(*h.layer->params()[p]));
      upload(*cuda_layer->params()[p], to_host(*h.layer->params()[p], true), true);
    }
    ctx.stream = gpu_stream;
  }
  Layer<float>& layer = gpu ? *cuda_layer : *h.layer;
  auto on_device = [&](const std::function<void()>& work) {
    if (!gpu) return work();
    gpu_stream->submit(work);
    gpu_stream->synchronize();
  };
  on_device([&] { layer.forward(ctx, bottom, top); });
  LayerRun r;
  r.out = to_host(*top[0]);
  upload(*top[0], output_gradient(top[0]->count(), absolute), true);
  on_device([&] { layer.backward(ctx, top, {true}, bottom); });
  r.in_diff = to_host(*bottom[0], true);
  r.weight_diff = to_host(*layer.params()[0], true);
  if (layer.params().size() > 1) r.bias_diff = to_host(*layer.params()[1], true);
  return r;
}

// |fp32 - 16-bit| <= rate * sum|terms| + atol for every element of the four results, and 16 bits
// changed at least one element of each (or the layer did not round at all). With
// `bias_from_fp32` (CUDA's layers) the bias gradient sums the unrounded output gradient: it must
// be within fp32's summation error of the twin's: m terms, 2^-24 each, on either side.
void expect_within_rounding(const LayerRun& fp32, const LayerRun& sums, const LayerRun& low,
                            double rate, double atol, bool bias_from_fp32 = false) {
  auto expect_within = [](const std::vector<float>& want, const std::vector<float>& got,
                          const std::vector<float>& bound, const char* what, double relative,
                          double absolute, bool rounded) {
    ASSERT_EQ(want.size(), got.size()) << what;
    double changed = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      const double error = std::abs(static_cast<double>(got[i]) - want[i]);
      ASSERT_LE(error, relative * bound[i] + absolute + 1e-7) << what << " element " << i;
      changed = std::max(changed, error);
    }
    if (rounded) EXPECT_GT(changed, 0) << what << ": no element differs from fp32";
  };
  expect_within(fp32.out, low.out, sums.out, "forward", rate, atol, true);
  expect_within(fp32.in_diff, low.in_diff, sums.in_diff, "data gradient", rate, atol, true);
  expect_within(fp32.weight_diff, low.weight_diff, sums.weight_diff, "weight gradient", rate, atol,
                true);
  if (fp32.bias_diff.empty()) return;
  const double terms = static_cast<double>(fp32.out.size() / fp32.bias_diff.size());
  if (bias_from_fp32)
    expect_within(fp32.bias_diff, low.bias_diff, sums.bias_diff, "bias gradient",
                  terms * std::ldexp(1.0, -23), 0, false);
  else
    expect_within(fp32.bias_diff, low.bias_diff, sums.bias_diff, "bias gradient", rate, atol, true);
}

double unit_roundoff(Precision precision) {
  return std::ldexp(1.0, precision == Precision::kBf16 ? -8 : -11);
}

class Layer16 : public ::testing::TestWithParam<std::tuple<Layer16Case, Precision>> {};

// rate = 2u + u^2 (each product's two rounded operands) plus fp32's summation error over the
// longest reduction; atol covers fp16's subnormal operands (absolute error 2^-25 each, times
// operands of at most 1).
TEST_P(Layer16, MatchesItsFp32TwinWithinTheRoundingOfItsOperands) {
  const auto& [c, precision] = GetParam();
  const double u = unit_roundoff(precision);
  const double n = static_cast<double>(c.longest_sum);
  const double atol = precision == Precision::kFp16 ? n * std::ldexp(1.0, -24) : 0;
  expect_within_rounding(run_layer(c, Precision::kFp32, false),
                         run_layer(c, Precision::kFp32, true), run_layer(c, precision, false),
                         2 * u + u * u + n * std::ldexp(1.0, -23), atol);
}

// The same layers on cuDNN's and cuBLAS's 16-bit kernels against the CPU's fp32 twin, under
// `--layout fastest` (convolutions with channels in 8s take their operands channels last) and
// `--layout nchw`.
// A suite's CUDA device and stream, opened once for its tests (none without a GPU).
template <typename Param>
class CudaSuite : public ::testing::TestWithParam<Param> {
 protected:
  static void SetUpTestSuite() {
    if (cuda_device_count() == 0) return;
    set_cuda_options({/*tf32=*/false, size_t{256} << 20, /*deterministic=*/true});
    device_ = make_device(DeviceKind::Cuda, 0).release();
    stream_ = device_->create_stream("compute").release();
  }
  static void TearDownTestSuite() {
    delete stream_;
    delete device_;
    stream_ = nullptr;
    device_ = nullptr;
  }
  static inline Device* device_ = nullptr;
  static inline Stream* stream_ = nullptr;
};

class Layer16OnCuda : public CudaSuite<std::tuple<Layer16Case, Precision, bool>> {};

// Besides the CPU's bound: one more rounding (u) where cuDNN writes 16-bit results before they
// are widened, and twice the operands' and sums' terms for the transforms (Winograd, FFT) cuDNN
// may pick, which round intermediates of their own.
TEST_P(Layer16OnCuda, MatchesItsFp32TwinWithinTheRoundingOfItsOperands) {
  if (!device_) GTEST_SKIP() << "no CUDA GPU on this machine: CUDA test not run";
  const auto& [c, precision, channels_last] = GetParam();
  const ScopedChannelBlocks layout(channels_last);
  const double u = unit_roundoff(precision);
  const double n = static_cast<double>(c.longest_sum);
  const double atol = precision == Precision::kFp16 ? n * std::ldexp(1.0, -23) : 0;
  expect_within_rounding(run_layer(c, Precision::kFp32, false),
                         run_layer(c, Precision::kFp32, true),
                         run_layer(c, precision, false, device_, stream_),
                         2 * (2 * u + u * u + n * std::ldexp(1.0, -23)) + u, atol,
                         /*bias_from_fp32=*/true);
}

const char* kFillers =
    "weight_filler { type: 'uniform' min: -1 max: 1 } bias_filler { type: 'uniform' min: -1 max: 1 "
    "}";

std::vector<Layer16Case> layer16_cases() {
  return {
      // Few input channels: im2col + GEMM (what a net's first layer runs).
      {"Convolution_gemm_c3_s7_o4_k3_p1",
       cat("type: 'Convolution' convolution_param { num_output: 4 kernel_size: 3 pad: 1 ", kFillers,
           " }"),
       {2, 3, 7, 7},
       2 * 7 * 7},
      // 16 input channels in 2 groups, stride 2: oneDNN (its bf16 kernel on AVX512_BF16 CPUs).
      {"Convolution_onednn_c16_s9_o8_k3_s2_g2",
       cat("type: 'Convolution' convolution_param { num_output: 8 kernel_size: 3 stride: 2 group: "
           "2 ",
           kFillers, " }"),
       {2, 16, 9, 9},
       8 * 9},
      // Channels in 8s, so CUDA lays its operands channels last: more channels and positions than
      // the 32 x 32 tiles that transpose them; and in groups.
      {"Convolution_c40_s6_o48_k3_p1",
       cat("type: 'Convolution' convolution_param { num_output: 48 kernel_size: 3 pad: 1 ",
           kFillers, " }"),
       {2, 40, 6, 6},
       48 * 9},
      {"Convolution_c32_s7_o16_k3_g2",
       cat("type: 'Convolution' convolution_param { num_output: 16 kernel_size: 3 group: 2 ",
           kFillers, " }"),
       {2, 32, 7, 7},
       16 * 9},
      {"Deconvolution_c4_s5_o6_k3_s2",
       cat("type: 'Deconvolution' convolution_param { num_output: 6 kernel_size: 3 stride: 2 ",
           kFillers, " }"),
       {2, 4, 5, 5},
       2 * 5 * 5},
      {"InnerProduct_in48_o10",
       cat("type: 'InnerProduct' inner_product_param { num_output: 10 ", kFillers, " }"),
       {5, 3, 4, 4},
       48},
      {"InnerProduct_in20_o7_transpose",
       cat("type: 'InnerProduct' inner_product_param { num_output: 7 transpose: true ", kFillers,
           " }"),
       {6, 20},
       20},
  };
}

std::string layer16_name(const ::testing::TestParamInfo<std::tuple<Layer16Case, Precision>>& info) {
  return cat(std::get<0>(info.param).name, "_", to_string(std::get<1>(info.param)));
}

INSTANTIATE_TEST_SUITE_P(EveryMultiplyingLayer, Layer16,
                         ::testing::Combine(::testing::ValuesIn(layer16_cases()),
                                            ::testing::Values(Precision::kBf16, Precision::kFp16)),
                         layer16_name);
INSTANTIATE_TEST_SUITE_P(
    EveryMultiplyingLayer, Layer16OnCuda,
    ::testing::Combine(::testing::ValuesIn(layer16_cases()),
                       ::testing::Values(Precision::kBf16, Precision::kFp16), ::testing::Bool()),
    [](const ::testing::TestParamInfo<std::tuple<Layer16Case, Precision, bool>>& info) {
      return cat(std::get<0>(info.param).name, "_", to_string(std::get<1>(info.param)),
                 std::get<2>(info.param) ? "_fastest" : "_nchw");
    });

// BatchNorm's normalised values may wait in 16 bits (Packing::Rounding): its backward from them
// rounded stays within what that rounding can change. dx = (dy - mean(dy) - y mean(dy y)) / std,
// and rounding each y by at most u moves y mean(dy y) by at most (2u + u^2) |y| mean|dy y|; the
// data gradient as a whole moves by less than 2u (norm-wise). Channels of 288 values.
class BatchNormFrom16Bits : public ::testing::TestWithParam<Precision> {};

TEST_P(BatchNormFrom16Bits, BackwardMovesByNoMoreThanTheRoundingOfItsKeptValues) {
  const Precision precision = GetParam();
  const double u = unit_roundoff(precision);
  const Shape shape{8, 4, 6, 6};
  const int64_t channels = 4, spatial = 36, m = 8 * spatial;
  std::vector<float> x, y;  // the input and the normalised values, as forward left them
  const auto data_gradient = [&](bool round_kept) {
    Case<float> h("type: 'BatchNorm'", {shape}, 1);  // the same input every run
    h.setup();
    h.forward();
    Blob<float>& kept = *h.layer->mutable_kept_top();
    x = to_host(*h.bottom[0]);
    y = to_host(kept);
    if (round_kept) round_to_precision(precision, kept.data(), kept.mutable_data(), kept.count());
    upload(*h.top[0], output_gradient(h.top[0]->count(), false), true);
    h.layer->backward({}, h.top, {true}, h.bottom);
    return to_host(*h.bottom[0], true);
  };
  const std::vector<float> want = data_gradient(false), got = data_gradient(true);
  const std::vector<float> dy = output_gradient(static_cast<int64_t>(y.size()), false);
  const auto channel = [&](size_t i) { return static_cast<int64_t>(i) / spatial % channels; };
  std::vector<double> mean(channels), var(channels), mean_dy(channels), mean_dy_y(channels);
  for (size_t i = 0; i < x.size(); ++i) {
    mean[channel(i)] += x[i] / static_cast<double>(m);
    mean_dy[channel(i)] += dy[i] / static_cast<double>(m);
    mean_dy_y[channel(i)] += std::abs(dy[i] * static_cast<double>(y[i])) / m;
  }
  for (size_t i = 0; i < x.size(); ++i)
    var[channel(i)] += (x[i] - mean[channel(i)]) * (x[i] - mean[channel(i)]) / m;
  double error_norm = 0, norm = 0, largest = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const int64_t c = channel(i);
    const double inv_std = 1 / std::sqrt(var[c] + 1e-5);
    const double y_term = std::abs(static_cast<double>(y[i])) * mean_dy_y[c];
    const double bound = inv_std * ((2 * u + u * u) * y_term +
                                    0x1p-22 * (std::abs(dy[i]) + std::abs(mean_dy[c]) + y_term));
    const double error = std::abs(static_cast<double>(got[i]) - want[i]);
    ASSERT_LE(error, bound) << "element " << i;
    error_norm += error * error;
    norm += static_cast<double>(want[i]) * want[i];
    largest = std::max(largest, error);
  }
  EXPECT_GT(largest, 0) << "rounding the kept values changed no gradient";
  EXPECT_LT(std::sqrt(error_norm / norm), 2 * u);
}

INSTANTIATE_TEST_SUITE_P(Precisions, BatchNormFrom16Bits,
                         ::testing::Values(Precision::kBf16, Precision::kFp16),
                         [](const auto& info) { return to_string(info.param); });

// LRN's input may wait in bf16 (Packing::Rounding, Layer::backward_may_round): its backward from
// that rounding stays within what it can change, on the CPU layer (which keeps the forward's
// scale) and in the CUDA layer's column function (which computes the scale again from the rounded
// input). With dx = dy s^-b - (2ab/n) x sum_W(dy x s^(-b-1)), rounding each x by at most u moves s
// by at most e = 2u + u^2 of itself, s^-b by a1 = (1-e)^-b - 1, and each window term by
// a3 = (1+u)^2 ((1-e)^(-b-1)) - 1: |error| <= a1 |T1| + a3 T2abs, T2abs the sum of the terms'
// absolute values.
TEST(LrnFrom16Bits, BackwardMovesByNoMoreThanTheRoundingOfItsInput) {
  const double u = unit_roundoff(Precision::kBf16);
  const int channels = 12, size = 5;
  const double alpha = 2, beta = 0.75, k = 1, alpha_over_n = alpha / size;
  const Shape shape{2, channels, 3, 4};
  const int64_t plane = 12, count = 2 * channels * plane;
  std::vector<float> x;
  const std::vector<float> dy = output_gradient(count, false);
  const auto layer_gradient = [&](bool round_input) {
    Case<float> h("type: 'LRN' lrn_param { local_size: 5 alpha: 2 beta: 0.75 }", {shape}, 1);
    h.setup();
    h.forward();
    x = to_host(*h.bottom[0]);
    Blob<float>& in = *h.bottom[0];
    if (round_input) round_to_precision(Precision::kBf16, in.data(), in.mutable_data(), count);
    upload(*h.top[0], dy, true);
    h.layer->backward({}, h.top, {true}, h.bottom);
    return to_host(*h.bottom[0], true);
  };
  const auto column_gradient = [&](bool round_input) {
    std::vector<float> in = x, dx(in.size());
    if (round_input) round_to_precision(Precision::kBf16, in.data(), in.data(), count);
    for (int64_t column = 0; column < 2 * plane; ++column) {
      const int64_t at = column / plane * channels * plane + column % plane;
      lrn::across_backward_column(in.data() + at, dy.data() + at, dx.data() + at, plane, channels,
                                  size, float(alpha_over_n), float(k), float(beta));
    }
    return dx;
  };
  const std::vector<float> want = layer_gradient(false), got = layer_gradient(true);
  const std::vector<float> column_want = column_gradient(false), column_got = column_gradient(true);
  const double e = 2 * u + u * u, a1 = std::pow(1 - e, -beta) - 1,
               a3 = (1 + u) * (1 + u) * std::pow(1 - e, -beta - 1) - 1;
  const auto at = [&](int64_t n, int64_t c, int64_t p) { return (n * channels + c) * plane + p; };
  for (const auto& [name, exact, rounded] : {std::tuple{"the CPU layer", &want, &got},
                                             {"the column function", &column_want, &column_got}}) {
    SCOPED_TRACE(name);
    double largest = 0, error_norm = 0, norm = 0;
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t c = 0; c < channels; ++c)
        for (int64_t p = 0; p < plane; ++p) {
          const auto scale = [&](int64_t j) {
            double sum = 0;
            for (int64_t i = std::max<int64_t>(j - 2, 0);
                 i <= std::min<int64_t>(j + 2, channels - 1); ++i)
              sum += double(x[at(n, i, p)]) * x[at(n, i, p)];
            return k + alpha_over_n * sum;
          };
          const double t1 = std::abs(dy[at(n, c, p)]) * std::pow(scale(c), -beta);
          double t2 = 0;
          for (int64_t j = std::max<int64_t>(c - 2, 0); j <= std::min<int64_t>(c + 2, channels - 1);
               ++j)
            t2 +=
                std::abs(double(dy[at(n, j, p)]) * x[at(n, j, p)]) * std::pow(scale(j), -beta - 1);
          t2 *= 2 * alpha_over_n * beta * std::abs(x[at(n, c, p)]);
          const size_t i = static_cast<size_t>(at(n, c, p));
          const double error = std::abs(double((*rounded)[i]) - (*exact)[i]);
          ASSERT_LE(error, a1 * t1 + a3 * t2 + 0x1p-20 * (t1 + t2)) << "element " << i;
          largest = std::max(largest, error);
          error_norm += error * error;
          norm += double((*exact)[i]) * (*exact)[i];
        }
    EXPECT_GT(largest, 0) << "rounding the input changed no gradient";
    EXPECT_LT(std::sqrt(error_norm / norm), u);  // measured: 0.16u (the layer), 0.18u (column)
  }
}

// What a planned net keeps only as a 16-bit copy (Blob::packed_values,
// Layer::backward_reads_packed) a layer's backward reads from that copy, to the bits it gets from
// the values widened back, while the fp32 bytes hold something else (NaN here): ReLU (plain and
// leaky; zeros, tiny values and infinity among its inputs), a convolution's input (im2col + GEMM
// with one channel, oneDNN with 16, channels last on CUDA), LRN across channels (NCHW, and a
// channel block of 16 on the CPU).
struct PackedRead {
  std::string name, text;
  Shape bottom;
  Precision precision;
  int64_t block = 1;
};

void PrintTo(const PackedRead& k, std::ostream* os) {
  *os << k.name;
}

// The parameters' gradients, which backward adds to, start at 0.25 in every run.
void preset_param_gradients(Layer<float>& layer) {
  for (const auto& p : layer.params())
    upload(*p, std::vector<float>(static_cast<size_t>(p->count()), 0.25f), true);
}

// After a backward into `y`: its gradient, then each parameter's.
std::vector<float> input_and_param_gradients(Layer<float>& layer, const Blob<float>& y) {
  std::vector<float> gradients = to_host(y, true);
  for (const auto& p : layer.params()) {
    const std::vector<float> diff = to_host(*p, true);
    gradients.insert(gradients.end(), diff.begin(), diff.end());
  }
  return gradients;
}

// One backward after a forward, from `y` (the forward's input values in another blob, so that
// no layer finds there what its forward read) or, `packed`, from their 16-bit copy alone: the
// input's and parameters' gradients.
std::vector<float> backward_reading(const PackedRead& k, bool packed, Device* gpu = nullptr,
                                    Stream* stream = nullptr) {
  const PrecisionScope scope(k.precision);
  Device& device = gpu ? *gpu : default_cpu_device();
  const std::unique_ptr<Layer<float>> layer =
      create_layer<float>(testing::parse_layer(k.text), device);
  Blob<float> x(device, k.bottom), y(device, k.bottom), top(device);
  std::vector<float> values = output_gradient(x.count(), false);
  const float specials[] = {0.f, -0.f, 1e-30f, -1e-30f, std::numeric_limits<float>::infinity()};
  if (k.text.find("ReLU") != std::string::npos)
    std::copy(std::begin(specials), std::end(specials), values.begin());
  round_to_precision(k.precision, values.data(), values.data(), x.count());
  for (Blob<float>* b : {&x, &y}) {
    b->set_channel_block(k.block);
    upload(*b, values);
  }
  Rng rng(5);
  layer->setup({&x}, {&top}, rng);
  top.set_channel_block(k.block);
  EXPECT_TRUE(layer->backward_reads_packed(y, {&y}, {&top}));
  preset_param_gradients(*layer);
  RunContext ctx;
  ctx.stream = stream;
  const auto on_device = [&](const std::function<void()>& work) {
    if (!stream) return work();
    stream->submit(work);
    stream->synchronize();
  };
  on_device([&] { layer->forward(ctx, {&x}, {&top}); });
  upload(top, output_gradient(top.count(), false), true);
  std::vector<uint16_t> bits(static_cast<size_t>(y.count()));
  narrow_to_precision(k.precision, values.data(), bits.data(), y.count());
  DeviceBuffer copy(device, bits.size() * sizeof(uint16_t));
  device.copy(copy.get(), bits.data(), bits.size() * sizeof(uint16_t));
  if (packed) {
    upload(y, std::vector<float>(values.size(), std::numeric_limits<float>::quiet_NaN()));
    y.bind_packed_values(static_cast<const uint16_t*>(copy.get()));
  }
  on_device([&] { layer->backward(ctx, {&top}, {true}, {&y}); });
  return input_and_param_gradients(*layer, y);
}

void expect_same_bits_from_the_copy(const PackedRead& k, Device* gpu = nullptr,
                                    Stream* stream = nullptr) {
  const std::vector<float> widened = backward_reading(k, false, gpu, stream);
  const std::vector<float> packed = backward_reading(k, true, gpu, stream);
  ASSERT_EQ(widened.size(), packed.size());
  if (!gpu)
    EXPECT_EQ(0, std::memcmp(widened.data(), packed.data(), widened.size() * sizeof(float)));
  else  // cuDNN's ReLU writes the masked zeros with a sign of its choosing
    EXPECT_EQ(widened, packed);
  EXPECT_GT(std::count_if(widened.begin(), widened.end(), [](float g) { return g != 0; }), 0);
}

std::vector<PackedRead> packed_read_cases() {
  const std::string conv =
      cat("type: 'Convolution' convolution_param { num_output: 16 kernel_size: 3 pad: 1 ", kFillers,
          " }");
  const std::string lrn = "type: 'LRN' lrn_param { local_size: 5 alpha: 2 beta: 0.75 }";
  return {{"relu_bf16", "type: 'ReLU'", {2, 3, 4, 5}, Precision::kBf16},
          {"relu_fp16", "type: 'ReLU'", {2, 3, 4, 5}, Precision::kFp16},
          {"leaky_relu_bf16",
           "type: 'ReLU' relu_param { negative_slope: 0.1 }",
           {2, 3, 4, 5},
           Precision::kBf16},
          {"conv_1_channel_bf16", conv, {2, 1, 6, 6}, Precision::kBf16},
          {"conv_16_channels_bf16", conv, {2, 16, 6, 6}, Precision::kBf16},
          {"conv_16_channels_fp16", conv, {2, 16, 6, 6}, Precision::kFp16},
          {"lrn_bf16", lrn, {2, 32, 3, 4}, Precision::kBf16},
          {"lrn_block16_bf16", lrn, {2, 32, 3, 4}, Precision::kBf16, 16}};
}

std::string packed_read_name(const ::testing::TestParamInfo<PackedRead>& info) {
  return info.param.name;
}

class ReadsPacked : public ::testing::TestWithParam<PackedRead> {};

TEST_P(ReadsPacked, GetsTheBitsOfTheValuesWidenedBack) {
  expect_same_bits_from_the_copy(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Layers, ReadsPacked, ::testing::ValuesIn(packed_read_cases()),
                         packed_read_name);

// What a layer says its backward gets to the same bits from a blob's values rounded to 16 bits
// (Layer::backward_exact_from_16_bits, which lets a planned net keep only a 16-bit copy), it does:
// the gradients from values of magnitudes 2^-40 to 2^10, both signs (a ReLU's also zeros and
// infinity) equal,
// bit for bit, those from the same values rounded (normal floats: bf16 also rounds fp32's
// subnormals below 2^-133 to zero). Where it says no, rounding does change them: fp16 rounds
// magnitudes below 2^-25 to zero, and so the sign a ReLU's mask reads (VGG-16 trained to other bits
// when it said yes).
struct RoundedRead {
  std::string name, text;
  Shape bottom;
  Precision precision;
  bool exact;  // what the layer should say
};

void PrintTo(const RoundedRead& k, std::ostream* os) {
  *os << k.name;
}

// How backward reads the values: as they are, rounded to nearest, or narrowed keeping their signs
// (narrow_keeping_signs) and widened back.
enum class Reading { kValues, kRounded, kSignsKept };

// One backward after a forward from the values, reading them as `reading` says: the input's and
// parameters' gradients.
std::vector<float> backward_from(const RoundedRead& k, Reading reading) {
  const PrecisionScope scope(k.precision);
  Device& device = default_cpu_device();
  const std::unique_ptr<Layer<float>> layer =
      create_layer<float>(testing::parse_layer(k.text), device);
  Blob<float> x(device, k.bottom), y(device, k.bottom), top(device);
  std::mt19937 gen(11);
  std::uniform_real_distribution<float> exponent(-40, 10);
  std::vector<float> values(static_cast<size_t>(x.count()));
  for (float& v : values) v = std::exp2(exponent(gen)) * (gen() % 2 ? 1.f : -1.f);
  const float specials[] = {0.f, -0.f, std::numeric_limits<float>::infinity()};
  if (k.text.find("ReLU") != std::string::npos)  // the others would carry an infinity throughout
    std::copy(std::begin(specials), std::end(specials), values.begin());
  upload(x, values);
  if (reading == Reading::kRounded)
    round_to_precision(k.precision, values.data(), values.data(), x.count());
  if (reading == Reading::kSignsKept) {
    std::vector<uint16_t> bits(values.size());
    narrow_keeping_signs(k.precision, values.data(), bits.data(), x.count());
    widen_from_precision(k.precision, bits.data(), values.data(), x.count());
  }
  upload(y, values);
  Rng rng(5);
  layer->setup({&x}, {&top}, rng);
  EXPECT_EQ(layer->backward_exact_from_16_bits(y, {&y}, {&top}), k.exact);
  preset_param_gradients(*layer);
  const RunContext ctx;
  layer->forward(ctx, {&x}, {&top});
  upload(top, output_gradient(top.count(), false), true);
  layer->backward(ctx, {&top}, {true}, {&y});
  return input_and_param_gradients(*layer, y);
}

class ExactFrom16Bits : public ::testing::TestWithParam<RoundedRead> {};

TEST_P(ExactFrom16Bits, WhereALayerSaysSoRoundingChangesNoGradient) {
  const RoundedRead& k = GetParam();
  const std::vector<float> from_values = backward_from(k, Reading::kValues);
  const std::vector<float> from_rounded = backward_from(k, Reading::kRounded);
  ASSERT_EQ(from_values.size(), from_rounded.size());
  const bool same =
      std::memcmp(from_values.data(), from_rounded.data(), from_values.size() * sizeof(float)) == 0;
  EXPECT_EQ(same, k.exact);
}

// What reads only signs (a ReLU's mask, Layer::backward_reads_only_sign) gets the values' bits
// from a copy narrowed keeping them, in fp16 too: how a planned net keeps what only masks read.
TEST(ExactFrom16Bits, AReluReadsItsValuesBitsFromACopyThatKeepsTheirSigns) {
  for (const RoundedRead& k :
       {RoundedRead{"relu_fp16", "type: 'ReLU'", {2, 3, 8, 8}, Precision::kFp16, false},
        RoundedRead{"leaky_relu_fp16",
                    "type: 'ReLU' relu_param { negative_slope: 0.1 }",
                    {2, 3, 8, 8},
                    Precision::kFp16,
                    false},
        RoundedRead{"relu_bf16", "type: 'ReLU'", {2, 3, 8, 8}, Precision::kBf16, true}}) {
    SCOPED_TRACE(k.name);
    const std::vector<float> from_values = backward_from(k, Reading::kValues);
    const std::vector<float> from_signs = backward_from(k, Reading::kSignsKept);
    ASSERT_EQ(from_values.size(), from_signs.size());
    EXPECT_EQ(
        0, std::memcmp(from_values.data(), from_signs.data(), from_values.size() * sizeof(float)));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Layers, ExactFrom16Bits,
    ::testing::Values(
        RoundedRead{"relu_bf16", "type: 'ReLU'", {2, 3, 8, 8}, Precision::kBf16, true},
        RoundedRead{"relu_fp16", "type: 'ReLU'", {2, 3, 8, 8}, Precision::kFp16, false},
        RoundedRead{"leaky_relu_bf16",
                    "type: 'ReLU' relu_param { negative_slope: 0.1 }",
                    {2, 3, 8, 8},
                    Precision::kBf16,
                    true},
        RoundedRead{"conv_16_channels_bf16",
                    cat("type: 'Convolution' convolution_param { num_output: 16 kernel_size: 3 ",
                        kFillers, " }"),
                    {2, 16, 6, 6},
                    Precision::kBf16,
                    true},
        RoundedRead{"conv_1_channel_fp16",
                    cat("type: 'Convolution' convolution_param { num_output: 4 kernel_size: 3 ",
                        kFillers, " }"),
                    {2, 1, 6, 6},
                    Precision::kFp16,
                    true},
        RoundedRead{
            "inner_product_bf16",
            cat("type: 'InnerProduct' inner_product_param { num_output: 8 ", kFillers, " }"),
            {4, 3, 4, 4},
            Precision::kBf16,
            true},
        RoundedRead{
            "inner_product_fp16",
            cat("type: 'InnerProduct' inner_product_param { num_output: 8 ", kFillers, " }"),
            {4, 3, 4, 4},
            Precision::kFp16,
            true}),
    [](const ::testing::TestParamInfo<RoundedRead>& info) { return info.param.name; });

// The same on CUDA (the CPU's channel blocks aside), convolutions with channels last and in NCHW.
class ReadsPackedOnCuda : public CudaSuite<std::tuple<PackedRead, bool>> {};

TEST_P(ReadsPackedOnCuda, GetsTheBitsOfTheValuesWidenedBack) {
  if (!device_) GTEST_SKIP() << "no CUDA GPU on this machine: CUDA test not run";
  const auto& [k, channels_last] = GetParam();
  const ScopedChannelBlocks layout(channels_last);
  expect_same_bits_from_the_copy(k, device_, stream_);
}

std::vector<PackedRead> packed_read_cuda_cases() {
  std::vector<PackedRead> cases;
  for (const PackedRead& k : packed_read_cases())
    if (k.block == 1) cases.push_back(k);
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Layers, ReadsPackedOnCuda,
                         ::testing::Combine(::testing::ValuesIn(packed_read_cuda_cases()),
                                            ::testing::Bool()),
                         [](const ::testing::TestParamInfo<std::tuple<PackedRead, bool>>& info) {
                           return cat(std::get<0>(info.param).name,
                                      std::get<1>(info.param) ? "_fastest" : "_nchw");
                         });

// Which convolutions hand cuDNN their 16-bit operands channels last follows from the layer's
// shape and the run's settings alone, so it is checked here, GPU or not.
TEST(CudaChannelsLast, WhereEachGroupsChannelsComeInEightsIn16BitsUnlessNchw) {
  struct Conv {
    const char* param;
    Shape bottom;
    bool last;  // in 16 bits with `--layout fastest`
  };
  const std::vector<Conv> convs = {
      {"num_output: 96 kernel_size: 11 stride: 4", {1, 3, 35, 35}, false},      // 3 input channels
      {"num_output: 256 kernel_size: 5 pad: 2 group: 2", {1, 96, 9, 9}, true},  // 48 -> 128 a group
      {"num_output: 8 kernel_size: 3 group: 2", {1, 16, 9, 9}, false},          // 8 -> 4 a group
      {"num_output: 36 kernel_size: 3", {1, 40, 6, 6}, false},                  // 36 outputs
      {"num_output: 48 kernel_size: 1", {1, 40, 6, 6}, true}};
  for (const Precision p : {Precision::kFp32, Precision::kBf16, Precision::kFp16})
    for (const bool fastest : {true, false}) {
      const PrecisionScope precision(p);
      const ScopedChannelBlocks layout(fastest);
      for (const Conv& c : convs) {
        Case<float> h(cat("type: 'Convolution' convolution_param { ", c.param, " }"), {c.bottom},
                      1);
        h.setup();
        const auto& conv = dynamic_cast<const ConvolutionLayer<float>&>(*h.layer);
        EXPECT_EQ(conv.cuda_channels_last(), c.last && p != Precision::kFp32 && fastest)
            << c.param << " in " << to_string(p) << (fastest ? "" : " with --layout nchw");
      }
    }
}

TEST(RoundToPrecision, RoundsToNearestEvenAndKeepsInfAndNan) {
  // 1 + 2^-8 is halfway between bf16's 1 and 1 + 2^-7: ties go to the even one, 1; 1 + 3*2^-8
  // is halfway between 1 + 2^-7 and 1 + 2^-6: to 1 + 2^-6. fp16 keeps 10 bits of fraction.
  const std::vector<float> in{1 + 0x1p-8f, 1 + 3 * 0x1p-8f, 1 + 0x1p-9f + 0x1p-20f,
                              70000.f,     INFINITY,        NAN};
  std::vector<float> bf16(in.size()), fp16(in.size());
  round_to_precision(Precision::kBf16, in.data(), bf16.data(), 6);
  round_to_precision(Precision::kFp16, in.data(), fp16.data(), 6);
  EXPECT_EQ(bf16[0], 1.f);
  EXPECT_EQ(bf16[1], 1 + 0x1p-6f);
  EXPECT_EQ(bf16[2], 1.f);
  EXPECT_EQ(bf16[3], 70144.f);  // 70000 = 0x1.1170p16: 8 bits of fraction keep 0x1.12p16
  EXPECT_EQ(bf16[4], INFINITY);
  EXPECT_TRUE(std::isnan(bf16[5]));
  EXPECT_EQ(fp16[0], 1 + 0x1p-8f);
  EXPECT_EQ(fp16[2], 1 + 0x1p-9f);
  EXPECT_EQ(fp16[3], INFINITY);  // beyond fp16's 65504
  EXPECT_TRUE(std::isnan(fp16[5]));
}

// A pack (activation_plan.hpp) keeps the rounding in 16 bits: widening it gives back exactly what
// round_to_precision gives, for ties, subnormals, values past fp16's range, Inf and NaN, and a
// million random values over fp32's exponents (the pack holds 2 bytes, half of fp32's 4).
TEST(RoundToPrecision, NarrowingToSixteenBitsAndBackIsTheRounding) {
  std::vector<float> in{1 + 0x1p-8f, 1 + 3 * 0x1p-8f, -0x1p-140f, 0x1p-126f,
                        70000.f,     -INFINITY,       NAN,        -0.f};
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> fraction(-1.f, 1.f);
  std::uniform_int_distribution<int> exponent(-150, 130);
  for (int i = 0; i < 1 << 20; ++i) in.push_back(std::ldexp(fraction(rng), exponent(rng)));
  const auto n = static_cast<int64_t>(in.size());
  for (Precision p : {Precision::kBf16, Precision::kFp16}) {
    SCOPED_TRACE(to_string(p));
    std::vector<uint16_t> packed(in.size());
    std::vector<float> widened(in.size()), rounded(in.size());
    narrow_to_precision(p, in.data(), packed.data(), n);
    widen_from_precision(p, packed.data(), widened.data(), n);
    round_to_precision(p, in.data(), rounded.data(), n);
    EXPECT_EQ(0, std::memcmp(widened.data(), rounded.data(), in.size() * sizeof(float)));
  }
  // A NaN whose payload is in its low bits stays a (quiet) NaN in bf16, not Inf.
  const float low_payload = std::bit_cast<float>(0x7f800001u);
  uint16_t narrowed = 0;
  narrow_to_precision(Precision::kBf16, &low_payload, &narrowed, 1);
  EXPECT_EQ(narrowed, 0x7fc0);
  float rounded = 0;
  round_to_precision(Precision::kBf16, &low_payload, &rounded, 1);
  EXPECT_TRUE(std::isnan(rounded));
}

TEST(LossScale, DynamicHalvesOnOverflowAndDoublesAfterAFiniteRun) {
  LossScale scale({true, 1024, 3});
  EXPECT_EQ(scale.record(false), LossScale::Change::kHalved);
  EXPECT_EQ(scale.value(), 512);
  EXPECT_EQ(scale.record(true), LossScale::Change::kNone);
  EXPECT_EQ(scale.record(true), LossScale::Change::kNone);
  EXPECT_EQ(scale.record(false), LossScale::Change::kHalved);  // the run starts over
  EXPECT_EQ(scale.value(), 256);
  for (int i = 0; i < 2; ++i) EXPECT_EQ(scale.record(true), LossScale::Change::kNone);
  EXPECT_EQ(scale.record(true), LossScale::Change::kDoubled);
  EXPECT_EQ(scale.value(), 512);
  EXPECT_EQ(scale.skipped_steps(), 2);
  EXPECT_EQ(scale.finite_run(), 0);

  LossScale fixed({false, 128, 3});
  EXPECT_TRUE(fixed.active());
  for (int i = 0; i < 4; ++i) EXPECT_EQ(fixed.record(i % 2 == 0), LossScale::Change::kNone);
  EXPECT_EQ(fixed.value(), 128);
  EXPECT_EQ(fixed.skipped_steps(), 2);

  LossScale low({true, 1, 3});  // a gradient that overflows unscaled: fail, never skip forever
  EXPECT_NE(testing::error_of<RuntimeCheckError>([&] {
              low.record(false);
            }).find("not finite even at loss scale 1"),
            std::string::npos);
}

TEST(LossScale, ParsesItsFlag) {
  EXPECT_TRUE(parse_loss_scale("auto", true, 2000).dynamic);
  EXPECT_FALSE(LossScale(parse_loss_scale("auto", false, 2000)).active());
  EXPECT_FALSE(LossScale(parse_loss_scale("off", true, 2000)).active());
  const LossScaleSettings start = parse_loss_scale("dynamic:1e6", false, 50);
  EXPECT_TRUE(start.dynamic);
  EXPECT_EQ(start.initial, 1e6);
  EXPECT_EQ(start.growth_interval, 50);
  const LossScaleSettings fixed = parse_loss_scale("128", true, 2000);
  EXPECT_FALSE(fixed.dynamic);
  EXPECT_EQ(fixed.initial, 128);
  for (const char* bad : {"0.5", "dynamic:", "lots", "inf"})
    EXPECT_NE(testing::error_of<UsageError>([&] {
                parse_loss_scale(bad, true, 2000);
              }).find(cat("--loss-scale ", bad, ": expected auto, off, dynamic")),
              std::string::npos)
        << bad;
}

}  // namespace
}  // namespace cgdp
