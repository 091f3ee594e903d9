// Deconvolution: the adjoint of the Convolution with the same weights (<deconv(x), z> equals
// <x, conv(z)>), Caffe's output size, FCN's bilinear upsampling, and finite-difference gradients.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "support/layer_case.hpp"

namespace cgdp {
namespace {

using testing::Case;
using testing::check_gradients;

struct Geometry {
  const char* params;
  Shape in;
  Shape out;
};

const Geometry kGeometries[] = {
    {"num_output: 3 kernel_size: 3 stride: 2", {2, 4, 3, 5}, {2, 3, 7, 11}},
    {"num_output: 4 kernel_size: 4 stride: 2 pad: 1 group: 2", {1, 2, 4, 4}, {1, 4, 8, 8}},
    {"num_output: 2 kernel_h: 3 kernel_w: 2 stride_h: 1 stride_w: 3 dilation: 2", {2, 3, 4, 3}, {2, 2, 8, 9}},
};

TEST(Deconvolution, IsTheAdjointOfTheConvolutionWithTheSameWeights) {
  for (const Geometry& geo : kGeometries) {
    SCOPED_TRACE(geo.params);
    Case<double> deconv(cat("name: 'd' type: 'Deconvolution' convolution_param { ", geo.params,
                            " bias_term: false weight_filler { type: 'gaussian' } }"),
                        {geo.in}, 1);
    deconv.setup();
    ASSERT_EQ(deconv.top[0]->shape(), geo.out);
    deconv.forward();
    // The convolution from the deconvolution's output back to its input's shape.
    std::string conv_params = geo.params;
    conv_params.replace(conv_params.find("num_output: "), 13, cat("num_output: ", geo.in[1], " "));
    Case<double> conv(cat("name: 'c' type: 'Convolution' convolution_param { ", conv_params,
                          " bias_term: false engine: CAFFE }"),
                      {geo.out}, 1, 7);
    conv.setup();
    ASSERT_EQ(conv.top[0]->shape(), geo.in);
    std::copy_n(deconv.layer->params()[0]->data(), deconv.layer->params()[0]->count(),
                conv.layer->params()[0]->mutable_data());
    conv.forward();
    double lhs = 0, rhs = 0;
    for (int64_t i = 0; i < deconv.top[0]->count(); ++i) lhs += deconv.top[0]->data()[i] * conv.bottom[0]->data()[i];
    for (int64_t i = 0; i < deconv.bottom[0]->count(); ++i) rhs += deconv.bottom[0]->data()[i] * conv.top[0]->data()[i];
    EXPECT_NEAR(lhs, rhs, 1e-12 * std::max(1.0, std::abs(rhs)));
  }
}

TEST(Deconvolution, GradientsMatchFiniteDifferences) {
  for (const Geometry& geo : kGeometries) {
    SCOPED_TRACE(geo.params);
    Case<double> c(cat("name: 'd' type: 'Deconvolution' convolution_param { ", geo.params,
                       " weight_filler { type: 'gaussian' } bias_filler { type: 'gaussian' } }"),
                   {geo.in}, 1);
    c.setup();
    check_gradients(*c.layer, c.bottom, c.top);
  }
}

// FCN's upsampling: stride 2, kernel 4, pad 1, the bilinear filler, one group per channel. A
// constant image stays constant away from the border.
TEST(Deconvolution, BilinearUpsamplingKeepsAConstantImage) {
  Case<double> c("name: 'up' type: 'Deconvolution' convolution_param { num_output: 2 kernel_size: 4 stride: 2 pad: 1 "
                 "group: 2 bias_term: false weight_filler { type: 'bilinear' } }",
                 {{1, 2, 4, 4}}, 1);
  std::fill_n(c.bottom[0]->mutable_data(), 32, 3.0);
  c.setup();
  c.forward();
  ASSERT_EQ(c.top[0]->shape(), (Shape{1, 2, 8, 8}));
  for (int ch = 0; ch < 2; ++ch)
    for (int h = 1; h < 7; ++h)
      for (int w = 1; w < 7; ++w) EXPECT_DOUBLE_EQ(c.top[0]->data()[(ch * 8 + h) * 8 + w], 3.0) << h << "," << w;
}

}  // namespace
}  // namespace cgdp
