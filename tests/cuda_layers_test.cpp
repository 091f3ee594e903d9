// Every CUDA layer against its CPU twin on random inputs: tops, bottom gradients and (accumulated)
// parameter gradients. float32 on the GPU with TF32 off against a float64 CPU reference within
// 1e-4 (norm-wise, per blob), and float64 on the GPU within 1e-9. Inputs in `coarse` cases take
// few distinct values, to hit ReLU's kink, pooling's and Eltwise MAX's ties. Dropout masks and
// BatchNorm's running sums are compared too. The GPU cases skip with one line without a GPU; the
// same harness also runs the float32 CPU layers against float64 everywhere, which checks the
// harness and the tolerance where no GPU is.
#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "../kernels/per_channel_scratch.cuh"
#include "cgdp/device/cpu_device.hpp"
#include "cgdp/device/cuda_options.hpp"
#include "cgdp/device/devices.hpp"
#include "cgdp/layers/registry.hpp"
#include "cgdp/layers/sufficient_factors.hpp"
#include "cgdp/sync/exchange_dtype.hpp"

namespace cgdp {
namespace {

struct Spec {
  std::string name;
  std::string text;             // the layer's prototxt
  std::vector<Shape> bottoms;
  int tops = 1;
  bool in_place = false;        // top 0 is bottom 0
  bool coarse = false;          // inputs from {-1, -0.5, 0, 0.5, 1}
  int64_t classes = 0;          // > 0: bottom 1 holds labels in [0, classes)
  Phase phase = Phase::Train;
};

std::string spec_name(const ::testing::TestParamInfo<Spec>& info) { return info.param.name; }
void PrintTo(const Spec& spec, std::ostream* out) { *out << spec.name; }

proto::LayerParameter parse(const std::string& text) {
  proto::LayerParameter p;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &p)) << text;
  return p;
}

template <typename T>
std::vector<T> to_host(const Blob<T>& blob, bool diff = false) {
  std::vector<T> v(static_cast<size_t>(blob.count()));
  blob.device().copy(v.data(), diff ? blob.diff() : blob.data(), blob.bytes());
  return v;
}

template <typename T, typename V>
void upload(Blob<T>& blob, const std::vector<V>& values, bool diff = false) {
  ASSERT_EQ(static_cast<int64_t>(values.size()), blob.count());
  const std::vector<T> typed(values.begin(), values.end());
  blob.device().copy(diff ? blob.mutable_diff() : blob.mutable_data(), typed.data(), blob.bytes());
}

// ||got - want|| / ||want|| (absolute when want is zero); every value must be finite.
template <typename T>
void expect_close(const std::vector<T>& got, const std::vector<double>& want, double tolerance,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double diff = 0, norm = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(std::isfinite(static_cast<double>(got[i]))) << what << "[" << i << "] = " << got[i];
    diff += (got[i] - want[i]) * (got[i] - want[i]);
    norm += want[i] * want[i];
  }
  EXPECT_LE(norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff), tolerance) << what;
}

std::vector<float> random_values(int64_t n, uint64_t seed, bool coarse) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(-1, 1);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = coarse ? static_cast<float>(std::round(dist(rng) * 2) / 2) : static_cast<float>(dist(rng));
  return v;
}

// One layer with its own blobs on one device.
template <typename T>
struct Instance {
  Instance(const Spec& spec, Device& device) : layer(create_layer<T>(parse(spec.text), device)) {
    for (const Shape& shape : spec.bottoms) bottom.push_back(add(device, shape));
    for (int i = 0; i < spec.tops; ++i)
      top.push_back(i == 0 && spec.in_place ? bottom[0] : add(device, {}));
  }
  Blob<T>* add(Device& device, const Shape& shape) {
    blobs.push_back(std::make_unique<Blob<T>>(device, shape));
    return blobs.back().get();
  }
  std::unique_ptr<Layer<T>> layer;
  std::vector<std::unique_ptr<Blob<T>>> blobs;
  BlobVec<T> bottom, top;
};

class CudaLayers : public ::testing::TestWithParam<Spec> {
 protected:
  static void SetUpTestSuite() {
    cpu_stream_ = default_cpu_device().create_stream("compute").release();
    if (cuda_device_count() == 0) return;
    set_cuda_options({/*tf32=*/false, size_t{256} << 20, /*deterministic=*/true});
    device_ = make_device(DeviceKind::Cuda, 0).release();
    stream_ = device_->create_stream("compute").release();
  }
  static void TearDownTestSuite() {
    delete stream_;
    delete device_;
    delete cpu_stream_;
    stream_ = cpu_stream_ = nullptr;
    device_ = nullptr;
  }

  // Runs `spec` in T on `device` (through `stream`) and in double on the CPU from the same
  // inputs and parameters.
  template <typename T>
  void compare(const Spec& spec, double tolerance, Device& device, Stream& stream) {
    Instance<T> gpu(spec, device);
    Instance<double> cpu(spec, default_cpu_device());
    for (size_t b = 0; b < spec.bottoms.size(); ++b) {
      std::vector<float> v = random_values(count_of(spec.bottoms[b]), 11 + b, spec.coarse);
      if (b == 1 && spec.classes > 0)
        for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i * 7 + 3) % spec.classes);
      upload(*gpu.bottom[b], v);
      upload(*cpu.bottom[b], v);
    }
    Rng rng_gpu(5), rng_cpu(5);
    gpu.layer->setup(gpu.bottom, gpu.top, rng_gpu);
    cpu.layer->setup(cpu.bottom, cpu.top, rng_cpu);
    for (size_t p = 0; p < gpu.layer->params().size(); ++p)  // exactly the GPU's values
      upload(*cpu.layer->params()[p], to_host(*gpu.layer->params()[p]));
    for (size_t s = 0; s < gpu.layer->state().size(); ++s) {  // running sums under way, > 0
      std::vector<float> v = random_values(gpu.layer->state()[s]->count(), 90 + s, false);
      for (float& x : v) x = std::abs(x) + 0.5f;
      upload(*gpu.layer->state()[s], v);
      upload(*cpu.layer->state()[s], v);
    }
    const RunContext ctx{spec.phase, &stream, 3, 7, 40};
    RunContext cpu_ctx = ctx;
    cpu_ctx.stream = nullptr;
    stream.submit([&] { gpu.layer->forward(ctx, gpu.bottom, gpu.top); });
    stream.synchronize();
    cpu.layer->forward(cpu_ctx, cpu.bottom, cpu.top);
    for (size_t t = 0; t < gpu.top.size(); ++t)
      expect_close(to_host(*gpu.top[t]), to_host(*cpu.top[t]), tolerance, cat("top ", t));
    for (size_t s = 0; s < gpu.layer->state().size(); ++s)
      expect_close(to_host(*gpu.layer->state()[s]), to_host(*cpu.layer->state()[s]), tolerance,
                   cat("state ", s));
    backward(spec, gpu, cpu, ctx, cpu_ctx, tolerance);
  }

  // Top gradients and initial parameter gradients the same on both sides (parameter gradients
  // accumulate); bottom gradients poisoned with NaN on the GPU, so an unwritten one fails.
  template <typename T>
  void backward(const Spec& spec, Instance<T>& gpu, Instance<double>& cpu, const RunContext& ctx,
                const RunContext& cpu_ctx, double tolerance) {
    std::vector<bool> propagate(spec.bottoms.size());
    for (size_t b = 0; b < propagate.size(); ++b)
      propagate[b] = gpu.layer->can_backward_to(static_cast<int>(b));
    for (size_t b = 0; b < propagate.size(); ++b)
      if (propagate[b] && !(b == 0 && spec.in_place))
        upload(*gpu.bottom[b],
               std::vector<T>(gpu.bottom[b]->count(), std::numeric_limits<T>::quiet_NaN()), true);
    for (size_t t = 0; t < gpu.top.size(); ++t) {
      const auto dy = random_values(gpu.top[t]->count(), 50 + t, false);
      upload(*gpu.top[t], dy, true);
      upload(*cpu.top[t], dy, true);
    }
    for (size_t p = 0; p < gpu.layer->params().size(); ++p) {
      const auto g = random_values(gpu.layer->params()[p]->count(), 70 + p, false);
      upload(*gpu.layer->params()[p], g, true);
      upload(*cpu.layer->params()[p], g, true);
    }
    ctx.stream->submit([&] { gpu.layer->backward(ctx, gpu.top, propagate, gpu.bottom); });
    ctx.stream->synchronize();
    cpu.layer->backward(cpu_ctx, cpu.top, propagate, cpu.bottom);
    for (size_t b = 0; b < propagate.size(); ++b)
      if (propagate[b])
        expect_close(to_host(*gpu.bottom[b], true), to_host(*cpu.bottom[b], true), tolerance,
                     cat("bottom ", b, " gradient"));
    for (size_t p = 0; p < gpu.layer->params().size(); ++p)
      expect_close(to_host(*gpu.layer->params()[p], true), to_host(*cpu.layer->params()[p], true),
                   tolerance, cat("param ", p, " gradient"));
  }

  static Device* device_;  // the GPU, when there is one
  static Stream* stream_;
  static Stream* cpu_stream_;
};

Device* CudaLayers::device_ = nullptr;
Stream* CudaLayers::stream_ = nullptr;
Stream* CudaLayers::cpu_stream_ = nullptr;

TEST_P(CudaLayers, Float32MatchesTheCpuLayer) {
  if (!device_) GTEST_SKIP() << "no CUDA GPU on this machine: CUDA test not run";
  compare<float>(GetParam(), 1e-4, *device_, *stream_);
}

TEST_P(CudaLayers, Float64MatchesTheCpuLayer) {
  if (!device_) GTEST_SKIP() << "no CUDA GPU on this machine: CUDA test not run";
  compare<double>(GetParam(), 1e-9, *device_, *stream_);
}

// The harness itself, and its 1e-4, on the CPU layers in float32 (runs everywhere).
TEST_P(CudaLayers, HarnessCpuFloat32MatchesFloat64) {
  compare<float>(GetParam(), 1e-4, default_cpu_device(), *cpu_stream_);
}

std::string conv(const std::string& settings) {
  return "name: 'conv' type: 'Convolution' convolution_param { " + settings +
         " weight_filler { type: 'gaussian' std: 0.3 } bias_filler { type: 'gaussian' std: 0.3 } }";
}
std::string pool(const std::string& settings) {
  return "name: 'pool' type: 'Pooling' pooling_param { " + settings + " }";
}
std::string lrn(const std::string& settings) {
  return "name: 'lrn' type: 'LRN' lrn_param { " + settings + " }";
}

std::vector<Spec> specs() {
  const std::string ip_fill = " weight_filler { type: 'gaussian' std: 0.3 } bias_filler { type: 'gaussian' std: 0.3 }";
  const std::string scale_fill = " filler { type: 'gaussian' mean: 1 std: 0.3 } bias_filler { type: 'gaussian' std: 0.3 }";
  return {
      {"ConvPadded", conv("num_output: 4 kernel_size: 3 pad: 1"), {{2, 3, 9, 9}}},
      {"ConvGroupedStrided",
       conv("num_output: 6 kernel_size: 3 stride: 2 pad: 1 group: 2"),
       {{2, 4, 11, 10}}},
      {"ConvDilatedNoBias",
       conv("num_output: 3 kernel_size: 3 dilation: 2 pad: 2 bias_term: false"),
       {{1, 3, 12, 12}}},
      {"ConvPointwise", conv("num_output: 5 kernel_size: 1"), {{3, 8, 5, 5}}},
      {"ConvRectangular",
       conv("num_output: 4 kernel_h: 3 kernel_w: 5 pad_h: 1 pad_w: 2 stride_h: 2 stride_w: 1"),
       {{2, 2, 9, 8}}},
      {"PoolMaxCeil", pool("pool: MAX kernel_size: 3 stride: 2"), {{2, 3, 8, 8}}, 1, false, true},
      {"PoolMaxPadded",
       pool("pool: MAX kernel_size: 3 stride: 2 pad: 1"),
       {{2, 3, 9, 9}},
       1,
       false,
       true},
      {"PoolMax2x2", pool("pool: MAX kernel_size: 2 stride: 2"), {{2, 2, 8, 7}}, 1, false, true},
      {"PoolAveCeil", pool("pool: AVE kernel_size: 3 stride: 2"), {{2, 3, 8, 8}}},
      {"PoolStochastic",
       pool("pool: STOCHASTIC kernel_size: 3 stride: 2"),
       {{2, 3, 9, 9}},
       1,
       false,
       true},
      {"PoolStochasticTest",
       pool("pool: STOCHASTIC kernel_size: 2 stride: 2"),
       {{2, 3, 8, 8}},
       1,
       false,
       true,
       0,
       Phase::Test},
      {"PoolMaxFloor",
       pool("pool: MAX kernel_size: 3 stride: 2 round_mode: FLOOR"),
       {{2, 3, 8, 8}},
       1,
       false,
       true},
      {"PoolAveFloorPadded",
       pool("pool: AVE kernel_size: 3 stride: 2 pad: 1 round_mode: FLOOR"),
       {{2, 3, 8, 9}}},
      {"PoolAvePadded", pool("pool: AVE kernel_size: 3 stride: 2 pad: 1"), {{2, 3, 9, 9}}},
      {"PoolGlobalAve", pool("pool: AVE global_pooling: true"), {{2, 5, 7, 7}}},
      {"InnerProduct",
       "name: 'ip' type: 'InnerProduct' inner_product_param { num_output: 5" + ip_fill + " }",
       {{4, 3, 2, 2}}},
      {"InnerProductTransposed",
       "name: 'ip' type: 'InnerProduct' inner_product_param { num_output: 6 transpose: true" +
           ip_fill + " }",
       {{5, 7}}},
      {"InnerProductAxis2NoBias",
       "name: 'ip' type: 'InnerProduct' inner_product_param { num_output: 3 axis: 2 bias_term: "
       "false" +
           ip_fill + " }",
       {{2, 3, 4, 5}}},
      {"LrnAcrossCudnn", lrn("local_size: 5 alpha: 0.5 beta: 0.75"), {{2, 7, 4, 4}}},
      {"LrnAcrossWide", lrn("local_size: 17 alpha: 0.5 beta: 0.75 k: 2"), {{2, 20, 3, 3}}},
      {"LrnWithin",
       lrn("local_size: 3 alpha: 0.5 beta: 0.75 norm_region: WITHIN_CHANNEL"),
       {{2, 3, 6, 5}}},
      {"ReLU", "name: 'relu' type: 'ReLU'", {{3, 4, 5}}, 1, false, true},
      {"ReLUInPlace", "name: 'relu' type: 'ReLU'", {{3, 4, 5}}, 1, true, true},
      {"ReLULeaky",
       "name: 'relu' type: 'ReLU' relu_param { negative_slope: 0.1 }",
       {{3, 4, 5}},
       1,
       false,
       true},
      {"Sigmoid", "name: 'n' type: 'Sigmoid'", {{3, 4, 5}}},
      {"Deconvolution",
       "name: 'd' type: 'Deconvolution' convolution_param { num_output: 3 kernel_size: 3 stride: 2 "
       "weight_filler { type: 'gaussian' } bias_filler { type: 'gaussian' } }",
       {{2, 4, 3, 5}}},
      {"DeconvolutionGroupedPadded",
       "name: 'd' type: 'Deconvolution' convolution_param { num_output: 4 kernel_size: 4 "
       "stride: 2 pad: 1 group: 2 bias_term: false weight_filler { type: 'gaussian' } }",
       {{1, 2, 4, 4}}},
      {"Crop",
       "name: 'c' type: 'Crop' crop_param { axis: 2 offset: 1 offset: 2 }",
       {{2, 3, 5, 6}, {1, 1, 3, 2}}},
      {"ArgMaxTop2Values",
       "name: 'a' type: 'ArgMax' argmax_param { top_k: 2 out_max_val: true }",
       {{3, 7}},
       1,
       false,
       true},
      {"ArgMaxAxis1",
       "name: 'a' type: 'ArgMax' argmax_param { axis: 1 top_k: 2 }",
       {{2, 5, 3}},
       1,
       false,
       true},
      {"MVN", "name: 'm' type: 'MVN'", {{2, 3, 4, 5}}},
      {"MVNAcrossInPlace",
       "name: 'm' type: 'MVN' mvn_param { across_channels: true }",
       {{2, 3, 4}},
       1,
       true},
      {"MVNMeanOnly", "name: 'm' type: 'MVN' mvn_param { normalize_variance: false }", {{2, 3, 4}}},
      {"PReLU",
       "name: 'p' type: 'PReLU' prelu_param { filler { type: 'uniform' min: 0.1 max: 0.5 } }",
       {{3, 4, 5}}},
      {"PReLUSharedInPlace",
       "name: 'p' type: 'PReLU' prelu_param { channel_shared: true }",
       {{3, 4, 5, 2}},
       1,
       true},
      {"Bias",
       "name: 'b' type: 'Bias' bias_param { axis: 1 num_axes: 2 filler { type: 'gaussian' } }",
       {{2, 3, 4, 5}}},
      {"BiasInPlace",
       "name: 'b' type: 'Bias' bias_param { filler { type: 'gaussian' } }",
       {{2, 3, 4}},
       1,
       true},
      {"TanHInPlace", "name: 'n' type: 'TanH'", {{3, 4, 5}}, 1, true},
      {"AbsVal", "name: 'n' type: 'AbsVal'", {{3, 4, 5}}},
      {"BNLL", "name: 'n' type: 'BNLL'", {{3, 4, 5}}},
      {"PowerSquare",
       "name: 'n' type: 'Power' power_param { power: 2 scale: 0.5 shift: 1 }",
       {{3, 4, 5}}},
      {"PowerRoot",
       "name: 'n' type: 'Power' power_param { power: 0.5 scale: 2 shift: 5 }",
       {{3, 4, 5}}},
      {"ExpBase2InPlace",
       "name: 'n' type: 'Exp' exp_param { base: 2 scale: 0.5 shift: 1 }",
       {{3, 4, 5}},
       1,
       true},
      {"LogBase10", "name: 'n' type: 'Log' log_param { base: 10 scale: 2 shift: 5 }", {{3, 4, 5}}},
      {"ELUInPlace", "name: 'n' type: 'ELU' elu_param { alpha: 0.7 }", {{3, 4, 5}}, 1, true},
      {"Threshold",
       "name: 'n' type: 'Threshold' threshold_param { threshold: 0.25 }",
       {{3, 4, 5}},
       1,
       false,
       true},
      {"BatchNorm", "name: 'bn' type: 'BatchNorm'", {{4, 3, 5, 5}}},
      {"BatchNormInPlace2D", "name: 'bn' type: 'BatchNorm'", {{6, 5}}, 1, true},
      {"BatchNormGlobalStats",
       "name: 'bn' type: 'BatchNorm'",
       {{4, 3, 2, 2}},
       1,
       false,
       false,
       0,
       Phase::Test},
      // Planes of 1,920 (two tiles of a block) in two slices of images (5 and 4) per channel; 80
      // images of short planes (225: the flat loops) in two slices of 40.
      {"BatchNormPlanesInSlices", "name: 'bn' type: 'BatchNorm'", {{9, 2, 40, 48}}},
      {"BatchNormInPlaceShortPlanesInSlices",
       "name: 'bn' type: 'BatchNorm'",
       {{80, 2, 15, 15}},
       1,
       true},
      {"BatchNormGlobalStatsPlanes",
       "name: 'bn' type: 'BatchNorm'",
       {{3, 2, 40, 48}},
       1,
       false,
       false,
       0,
       Phase::Test},
      {"Scale",
       "name: 'scale' type: 'Scale' scale_param { bias_term: true" + scale_fill + " }",
       {{2, 3, 4, 4}}},
      {"ScalePlanesInSlices",
       "name: 'scale' type: 'Scale' scale_param { bias_term: true" + scale_fill + " }",
       {{9, 2, 40, 48}}},
      {"ScaleInPlaceTwoAxes",
       "name: 'scale' type: 'Scale' scale_param { axis: 0 num_axes: 2" + scale_fill + " }",
       {{2, 3, 4}},
       1,
       true},
      {"EltwiseSum",
       "name: 'e' type: 'Eltwise' eltwise_param { operation: SUM coeff: 1 coeff: -0.5 coeff: 2 }",
       {{2, 3, 4}, {2, 3, 4}, {2, 3, 4}}},
      {"EltwiseProd",
       "name: 'e' type: 'Eltwise' eltwise_param { operation: PROD }",
       {{2, 3, 4}, {2, 3, 4}, {2, 3, 4}}},
      {"EltwiseMaxTies",
       "name: 'e' type: 'Eltwise' eltwise_param { operation: MAX }",
       {{2, 3, 4}, {2, 3, 4}, {2, 3, 4}},
       1,
       false,
       true},
      {"ConcatChannels", "name: 'c' type: 'Concat'", {{2, 3, 4, 4}, {2, 2, 4, 4}, {2, 5, 4, 4}}},
      {"ConcatAxis0", "name: 'c' type: 'Concat' concat_param { axis: 0 }", {{2, 3, 2}, {3, 3, 2}}},
      {"Split", "name: 's' type: 'Split'", {{2, 3, 5}}, 3},
      {"SplitTwo", "name: 's' type: 'Split'", {{2, 3, 5}}, 2},   // kernels/sum.cu's short paths
      {"SplitFive", "name: 's' type: 'Split'", {{2, 3, 5}}, 5},  // and its tree
      {"Flatten", "name: 'f' type: 'Flatten'", {{2, 3, 4, 5}}},
      {"Reshape",
       "name: 'r' type: 'Reshape' reshape_param { shape { dim: 0 dim: -1 dim: 2 } }",
       {{2, 3, 4, 5}}},
      {"SlicePoints",
       "name: 's' type: 'Slice' slice_param { slice_point: 1 slice_point: 4 }",
       {{2, 6, 3, 3}},
       3},
      {"SliceAxis0Equal", "name: 's' type: 'Slice' slice_param { axis: 0 }", {{4, 5}}, 2},
      {"Softmax", "name: 'sm' type: 'Softmax'", {{3, 7, 2, 2}}},
      {"SoftmaxLastAxis", "name: 'sm' type: 'Softmax' softmax_param { axis: -1 }", {{4, 10}}},
      {"SoftmaxWithLoss",
       "name: 'loss' type: 'SoftmaxWithLoss'",
       {{6, 10}, {6}},
       1,
       false,
       false,
       10},
      {"SoftmaxWithLossIgnoredFull",
       "name: 'loss' type: 'SoftmaxWithLoss' loss_param { ignore_label: 3 normalization: FULL }",
       {{2, 5, 3, 3}, {2, 3, 3}},
       2,
       false,
       false,
       5},
      {"SoftmaxWithLossBatchSize",
       "name: 'loss' type: 'SoftmaxWithLoss' loss_param { normalization: BATCH_SIZE }",
       {{4, 6}, {4}},
       1,
       false,
       false,
       6},
      {"SoftmaxWithLossNone",
       "name: 'loss' type: 'SoftmaxWithLoss' loss_param { normalization: NONE ignore_label: 0 }",
       {{4, 6}, {4}},
       1,
       false,
       false,
       6},
      {"Accuracy", "name: 'acc' type: 'Accuracy'", {{8, 10}, {8}}, 1, false, true, 10},
      {"EuclideanLoss", "name: 'l' type: 'EuclideanLoss'", {{4, 3, 2}, {4, 6}}},
      {"SigmoidCrossEntropyLoss", "name: 'l' type: 'SigmoidCrossEntropyLoss'", {{4, 5}, {4, 5}}},
      {"SigmoidCrossEntropyLossIgnoredBatch",
       "name: 'l' type: 'SigmoidCrossEntropyLoss' loss_param { ignore_label: 0 normalization: "
       "BATCH_SIZE }",
       {{4, 5}, {4, 5}},
       1,
       false,
       true},
      {"ContrastiveLoss",
       "name: 'l' type: 'ContrastiveLoss' contrastive_loss_param { margin: 2 }",
       {{6, 4}, {6, 4}, {6}},
       1,
       false,
       true},
      {"ContrastiveLossLegacy",
       "name: 'l' type: 'ContrastiveLoss' contrastive_loss_param { margin: 3 legacy_version: true "
       "}",
       {{6, 4}, {6, 4}, {6}},
       1,
       false,
       true},
      {"HingeLossL1", "name: 'l' type: 'HingeLoss'", {{6, 5}, {6}}, 1, false, false, 5},
      {"HingeLossL2",
       "name: 'l' type: 'HingeLoss' hinge_loss_param { norm: L2 }",
       {{6, 5}, {6}},
       1,
       false,
       false,
       5},
      {"AccuracyTop3Ignored",
       "name: 'acc' type: 'Accuracy' accuracy_param { top_k: 3 ignore_label: 2 }",
       {{8, 10}, {8}},
       1,
       false,
       true,
       10},
      {"Dropout", "name: 'drop' type: 'Dropout' dropout_param { dropout_ratio: 0.3 }", {{5, 4, 3}}},
      {"DropoutInPlaceTest",
       "name: 'drop' type: 'Dropout'",
       {{5, 4, 3}},
       1,
       true,
       false,
       0,
       Phase::Test},
  };
}

INSTANTIATE_TEST_SUITE_P(AllLayers, CudaLayers, ::testing::ValuesIn(specs()), spec_name);

// Sufficient factors on the GPU: two micro-batches' staged rows are the very values the CPU layer
// stages, the weight gradient is left alone, and the rebuild, issued on another stream of the
// device (as the H2D stream runs it), matches the CPU's float64 rebuild.
TEST(CudaInnerProductFactors, StagedRowsAndTheRebuildMatchTheCpu) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU on this machine: CUDA test not run";
  set_cuda_options({/*tf32=*/false, size_t{256} << 20, /*deterministic=*/true});
  const auto device = make_device(DeviceKind::Cuda, 0);
  const auto compute = device->create_stream("compute"), h2d = device->create_stream("h2d");
  const Spec spec{"ip", "name: 'ip' type: 'InnerProduct' inner_product_param { num_output: 5 "
                        "weight_filler { type: 'gaussian' std: 1 } }", {{4, 3, 2, 2}}};
  Instance<float> gpu(spec, *device);
  Instance<double> cpu(spec, default_cpu_device());
  Rng rng_gpu(5), rng_cpu(5);
  gpu.layer->setup(gpu.bottom, gpu.top, rng_gpu);
  cpu.layer->setup(cpu.bottom, cpu.top, rng_cpu);
  for (size_t p = 0; p < gpu.layer->params().size(); ++p)
    upload(*cpu.layer->params()[p], to_host(*gpu.layer->params()[p]));
  auto& gf = dynamic_cast<SufficientFactors<float>&>(*gpu.layer);
  auto& cf = dynamic_cast<SufficientFactors<double>&>(*cpu.layer);
  const FactorShape shape = gf.factor_shape();
  const int64_t per_micro = shape.out_elements() + shape.in_elements();
  DeviceBuffer staging(*device, 2 * per_micro * sizeof(float));
  auto* rows = static_cast<float*>(staging.get());
  std::vector<double> cpu_rows(2 * per_micro);
  gf.stage_factors(rows, rows + 2 * shape.out_elements());
  cf.stage_factors(cpu_rows.data(), cpu_rows.data() + 2 * shape.out_elements());
  Blob<float>& weight = *gpu.layer->params()[0];
  const std::vector<float> poison(weight.count(), std::numeric_limits<float>::quiet_NaN());
  upload(weight, poison, true);
  for (int micro = 0; micro < 2; ++micro) {
    const auto x = random_values(gpu.bottom[0]->count(), 11 + micro, false);
    const auto dy = random_values(shape.out_elements(), 50 + micro, false);
    upload(*gpu.bottom[0], x);
    upload(*cpu.bottom[0], x);
    upload(*gpu.top[0], dy, true);
    upload(*cpu.top[0], dy, true);
    RunContext ctx{Phase::Train, compute.get()};
    ctx.micro_batch = micro;
    compute->submit([&] { gpu.layer->backward(ctx, gpu.top, {true}, gpu.bottom); });
    compute->synchronize();  // the next micro-batch's upload overwrites what this one stages
    ctx.stream = nullptr;
    cpu.layer->backward(ctx, cpu.top, {true}, cpu.bottom);
  }
  std::vector<float> staged(cpu_rows.size());
  device->copy(staged.data(), rows, staged.size() * sizeof(float));
  EXPECT_EQ(std::vector<double>(staged.begin(), staged.end()), cpu_rows);
  EXPECT_TRUE(std::isnan(to_host(weight, true)[0])) << "the weight gradient was written";
  RunContext ctx{Phase::Train, h2d.get()};
  h2d->submit([&] {
    gf.rebuild_weight_diff(ctx, rows, rows + 2 * shape.out_elements(), 2 * shape.rows);
  });
  h2d->synchronize();
  cf.rebuild_weight_diff({}, cpu_rows.data(), cpu_rows.data() + 2 * shape.out_elements(),
                         2 * shape.rows);
  expect_close(to_host(weight, true), to_host(*cpu.layer->params()[0], true), 1e-5,
               "rebuilt weight gradient");
  // From rows that came as bf16 (a bf16 exchange), on the tensor cores, against the same rounded
  // rows rebuilt in float64: the products are exact in fp32, so only the fp32 sums differ.
  ASSERT_TRUE(gf.rebuilds_from_bf16());
  EXPECT_FALSE(cf.rebuilds_from_bf16());
  std::vector<uint16_t> narrow(cpu_rows.size());
  std::vector<double> rounded(cpu_rows.size());
  for (size_t i = 0; i < narrow.size(); ++i) {
    narrow[i] = to_bf16(static_cast<float>(cpu_rows[i]));
    rounded[i] = from_bf16(narrow[i]);
  }
  DeviceBuffer narrow_rows(*device, narrow.size() * sizeof(uint16_t));
  auto* rows16 = static_cast<uint16_t*>(narrow_rows.get());
  device->copy(rows16, narrow.data(), narrow.size() * sizeof(uint16_t));
  upload(weight, poison, true);
  h2d->submit([&] {
    gf.rebuild_weight_diff_bf16(ctx, rows16, rows16 + 2 * shape.out_elements(), 2 * shape.rows);
  });
  h2d->synchronize();
  cf.rebuild_weight_diff({}, rounded.data(), rounded.data() + 2 * shape.out_elements(),
                         2 * shape.rows);
  expect_close(to_host(weight, true), to_host(*cpu.layer->params()[0], true), 1e-5,
               "weight gradient rebuilt from bf16 rows");
}

// How the CUDA per-channel sums split a batch (runs everywhere): every image in exactly one slice,
// no empty slice, and at most kMaxPartials partial sums of a kind unless the channels alone are
// more; the scratch holds both kinds and two values per channel.
TEST(PerChannelSums, SlicesCoverEveryImageOnceWithinTheScratch) {
  using kernels::ChannelView;
  for (const ChannelView v :
       {ChannelView{16, 64, 12544}, ChannelView{16, 2048, 49}, ChannelView{1, 64, 50176},
        ChannelView{256, 4096, 1}, ChannelView{9, 2, 1920}, ChannelView{80, 2, 225},
        ChannelView{7, 3, 100000}, ChannelView{0, 5, 5}}) {
    SCOPED_TRACE(cat(v.num, " x ", v.channels, " x ", v.spatial));
    const kernels::ChannelSlices sl = kernels::channel_slices(v);
    ASSERT_GE(sl.count, 1);
    if (v.num > 0) {
      EXPECT_GE(sl.count * sl.images, v.num);
      EXPECT_LT((sl.count - 1) * sl.images, v.num);  // the last slice holds an image
    }
    EXPECT_LE(sl.count * v.channels, std::max(kernels::kMaxPartials, v.channels));
    EXPECT_EQ(kernels::per_channel_scratch_bytes(v), 16 * v.channels * (sl.count + 1));
  }
  EXPECT_EQ(kernels::channel_slices({16, 64, 12544}).count, 16);  // ResNet's first BatchNorm
  EXPECT_EQ(kernels::channel_slices({9, 2, 1920}).images, 5);
}

}  // namespace
}  // namespace cgdp
