// An in-place ReLU right after a Convolution runs inside it on the CPU (Layer::absorb_relu): the
// loss, every parameter gradient and the input gradient must equal, bit for bit, those of the same
// net whose ReLU writes a separate top and so runs as a layer of its own, on either CPU engine.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "cgdp/device/cpu_device.hpp"
#include "cgdp/layers/convolution_layer.hpp"
#include "cgdp/net/model_file.hpp"
#include "cgdp/net/net.hpp"

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
  bool absorbed = false;
  bool onednn = false;  // the convolution ran on oneDNN
  double loss = 0;
  std::vector<float> relu_out, param_diff, input_diff;
};

// One forward and backward pass on fixed random inputs; parameters come from seed 3 either way.
Pass run(const std::string& text) {
  Net<float> net(parse_model(text, "test.prototxt"), Phase::Train, default_cpu_device(), 0, 3);
  std::mt19937 rng(11);
  std::normal_distribution<float> normal;
  for (float& v : net.input_data().mutable_data_span()) v = normal(rng);
  float* label = net.input_label()->mutable_data();
  for (int n = 0; n < 5; ++n) label[n] = static_cast<float>(n % 3);
  for (float& d : net.flat_diff()) d = 0;
  net.forward({});
  for (int i = net.num_layers() - 1; i >= 0; --i) net.backward_layer(i, {});
  Pass pass;
  pass.absorbed = net.absorbed(2);
  pass.onednn = dynamic_cast<const ConvolutionLayer<float>&>(net.layer(1)).uses_onednn();
  pass.loss = net.loss();
  const Blob<float>& relu_out = *net.tops(2)[0];
  pass.relu_out.assign(relu_out.data(), relu_out.data() + relu_out.count());
  pass.param_diff.assign(net.flat_diff().begin(), net.flat_diff().end());
  const Blob<float>& data = net.input_data();
  EXPECT_TRUE(data.has_diff());
  pass.input_diff.assign(data.diff(), data.diff() + data.count());
  return pass;
}

void expect_same_pass_on(const std::string& conv_param, bool onednn) {
  SCOPED_TRACE(conv_param);
  const Pass inside = run(model(conv_param, "conv"));
  const Pass apart = run(model(conv_param, "relu_out"));
  ASSERT_EQ(inside.onednn, onednn);
  ASSERT_EQ(apart.onednn, onednn);
  ASSERT_TRUE(inside.absorbed);
  ASSERT_FALSE(apart.absorbed);
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
