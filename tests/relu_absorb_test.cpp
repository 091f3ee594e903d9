// An in-place ReLU right after a Convolution runs inside it on the CPU, and its forward inside the
// 16-bit convolution's widening on CUDA (Layer::absorb_relu): the loss, every parameter gradient
// and the input gradient must equal, bit for bit, those of the same net whose ReLU writes a
// separate top and so runs as a layer of its own, on either CPU engine and on a GPU.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cgdp/device/cpu_device.hpp"
#include "cgdp/device/cuda_options.hpp"
#include "cgdp/device/devices.hpp"
#include "cgdp/device/layer_precision.hpp"
#include "cgdp/layers/convolution_layer.hpp"
#include "cgdp/net/model_file.hpp"
#include "cgdp/net/net.hpp"
#include "cgdp/tensor/channel_blocks.hpp"

namespace cgdp {
namespace {

// conv -> relu -> ip -> loss; `relu_top` is "conv" (in place, absorbable) or another name.
std::string model(const std::string& conv_param, const std::string& relu_top,
                  const std::string& relu_param = "") {
  return cat(R"(
    force_backward: true
    layer { name: "data" type: "Input" top: "data" top: "label"
            input_param { shape { dim: 5 dim: 16 dim: 9 dim: 9 } shape { dim: 5 } } }
    layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
            convolution_param { )",
             conv_param, R"( weight_filler { type: "gaussian" std: 0.3 }
                                bias_filler { type: "gaussian" std: 0.3 } } }
    layer { name: "relu" type: "ReLU" bottom: "conv" top: ")",
             relu_top, R"(" )", relu_param, R"( }
    layer { name: "ip" type: "InnerProduct" bottom: ")",
             relu_top, R"(" top: "ip"
            inner_product_param { num_output: 3 weight_filler { type: "xavier" } } }
    layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
  )");
}

struct Pass {
  bool absorbed = false;          // forward and backward
  bool forward_absorbed = false;  // forward (CUDA in 16 bits: as the convolution widens its result)
  bool onednn = false;            // the convolution ran on oneDNN
  double loss = 0;
  std::vector<float> relu_out, param_diff, input_diff;
};

template <typename T>
std::vector<T> to_host(Device& device, const T* values, int64_t count) {
  std::vector<T> v(static_cast<size_t>(count));
  device.copy(v.data(), values, v.size() * sizeof(T));
  return v;
}

// One forward and backward pass on fixed random inputs; parameters come from seed 3 either way.
Pass run(const std::string& text, Device& device = default_cpu_device(), Stream* stream = nullptr) {
  Net<float> net(parse_model(text, "test.prototxt"), Phase::Train, device, 0, 3);
  std::mt19937 rng(11);
  std::normal_distribution<float> normal;
  std::vector<float> data(static_cast<size_t>(net.input_data().count()));
  for (float& v : data) v = normal(rng);
  std::vector<float> label(static_cast<size_t>(net.input_label()->count()));
  for (size_t n = 0; n < label.size(); ++n) label[n] = static_cast<float>(n % 3);
  device.copy(net.input_data().mutable_data(), data.data(), data.size() * sizeof(float));
  device.copy(net.input_label()->mutable_data(), label.data(), label.size() * sizeof(float));
  std::unique_ptr<Stream> own = stream ? nullptr : device.create_stream("compute");
  Stream& s = stream ? *stream : *own;
  const RunContext ctx{Phase::Train, &s, 4, 2, 0};
  net.zero_param_diffs(s);
  net.forward(ctx);
  for (int i = net.num_layers() - 1; i >= 0; --i) net.backward_layer(i, ctx);
  s.synchronize();
  Pass pass;
  pass.absorbed = net.absorbed(2);
  pass.forward_absorbed = net.forward_absorbed(2);
  pass.onednn = dynamic_cast<const ConvolutionLayer<float>&>(net.layer(1)).uses_onednn();
  pass.loss = net.loss();
  const Blob<float>& relu_out = *net.tops(2)[0];
  pass.relu_out = to_host(device, relu_out.data(), relu_out.count());
  pass.param_diff = to_host(device, net.flat_diff().data(), net.learnable_count());
  const Blob<float>& input = net.input_data();
  EXPECT_TRUE(input.has_diff());
  pass.input_diff = to_host(device, input.diff(), input.count());
  return pass;
}

void expect_same_results(const Pass& inside, const Pass& apart) {
  EXPECT_EQ(inside.loss, apart.loss);
  EXPECT_EQ(inside.relu_out, apart.relu_out);
  EXPECT_EQ(inside.param_diff, apart.param_diff);
  EXPECT_EQ(inside.input_diff, apart.input_diff);
  // The pass must have clamped and masked something, or equality would prove nothing.
  int zeros = 0;
  for (float v : inside.relu_out) zeros += v == 0.f;
  EXPECT_GT(zeros, 0);
  EXPECT_LT(zeros, static_cast<int>(inside.relu_out.size()));
}

void expect_same_pass_on(const std::string& conv_param, bool onednn) {
  SCOPED_TRACE(conv_param);
  const Pass inside = run(model(conv_param, "conv"));
  const Pass apart = run(model(conv_param, "relu_out"));
  ASSERT_EQ(inside.onednn, onednn);
  ASSERT_EQ(apart.onednn, onednn);
  ASSERT_TRUE(inside.absorbed);
  ASSERT_FALSE(apart.absorbed);
  expect_same_results(inside, apart);
}

// Float convolutions run on oneDNN (when built with it; the input's 16 channels are enough for
// it) or on im2col + GEMM (engine: CAFFE): both absorb the ReLU.
void expect_same_pass(const std::string& conv_param) {
#ifdef CGDP_HAVE_ONEDNN
  expect_same_pass_on(conv_param + " engine: DEFAULT", true);
#endif
  expect_same_pass_on(conv_param + " engine: CAFFE", false);
}

TEST(ReluAbsorb, FoldedBiasConvolutionMatchesTheSeparateLayer) {
  expect_same_pass("num_output: 6 kernel_size: 3 pad: 1");
}

TEST(ReluAbsorb, GroupedStridedConvolutionMatchesTheSeparateLayer) {
  expect_same_pass("num_output: 6 kernel_size: 3 stride: 2 group: 2");
}

TEST(ReluAbsorb, PointwiseConvolutionMatchesTheSeparateLayer) {
  expect_same_pass("num_output: 6 kernel_size: 1");
}

TEST(ReluAbsorb, LeakyReluStaysALayer) {
  const Pass leaky = run(model("num_output: 6 kernel_size: 3", "conv",
                               "relu_param { negative_slope: 0.1 }"));
  EXPECT_FALSE(leaky.absorbed);
}

// CUDA in bf16 and fp16: the convolution's widening adds the bias and clamps (the ReLU's forward),
// in the NCHW kernel and, with channels in 8s under --layout fastest, in the channels-last
// transpose; the ReLU's backward stays a layer. cuDNN's choice of algorithm is cached per problem,
// so both nets run the same one.
TEST(ReluAbsorbOnCuda, The16BitConvolutionsWideningMatchesTheSeparateLayer) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU on this machine: CUDA test not run";
  set_cuda_options({/*tf32=*/false, size_t{256} << 20, /*deterministic=*/true});
  const std::unique_ptr<Device> gpu = make_device(DeviceKind::Cuda, 0);
  const std::unique_ptr<Stream> stream = gpu->create_stream("compute");
  for (const Precision precision : {Precision::kBf16, Precision::kFp16})
    for (const bool fastest : {true, false})
      for (const char* conv :
           {"num_output: 16 kernel_size: 3 pad: 1",
            "num_output: 16 kernel_size: 3 stride: 2 group: 2", "num_output: 6 kernel_size: 1"}) {
        SCOPED_TRACE(cat(to_string(precision), fastest ? " fastest " : " nchw ", conv));
        const ScopedLayerPrecision in_half(precision);
        const ScopedChannelBlocks layout(fastest);
        const Pass inside = run(model(conv, "conv"), *gpu, stream.get());
        const Pass apart = run(model(conv, "relu_out"), *gpu, stream.get());
        ASSERT_TRUE(inside.forward_absorbed);
        ASSERT_FALSE(inside.absorbed);
        ASSERT_FALSE(apart.forward_absorbed);
        expect_same_results(inside, apart);
      }
}

TEST(ReluAbsorb, FashionCnnAbsorbsBothConvolutionReLUs) {
  Net<float> net(load_model(find_model_file("fashion_cnn")), Phase::Train, default_cpu_device(), 2,
                 1);
  std::vector<std::string> absorbed;
  for (int i = 0; i < net.num_layers(); ++i)
    if (net.absorbed(i)) absorbed.push_back(net.layer(i).name());
  EXPECT_EQ(absorbed, (std::vector<std::string>{"relu1", "relu2"}));
}

}  // namespace
}  // namespace cgdp
