// PReLU and Bias, the learnable per-channel layers beside Scale, and Silence: forward against
// float64 formulas, gradients of inputs and parameters against finite differences, in place.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cgdp/net/model_file.hpp"
#include "cgdp/net/net.hpp"
#include "support/layer_case.hpp"

namespace cgdp {
namespace {

using testing::Case;
using testing::check_gradients;
using testing::error_of;
using testing::expect_in_place_matches;
using testing::keep_away;
using ::testing::HasSubstr;

TEST(PReLU, SlopesPerChannelOrSharedStartAtAQuarter) {
  for (const bool shared : {false, true}) {
    Case<double> c(cat("name: 'p' type: 'PReLU' prelu_param { channel_shared: ", shared ? "true" : "false", " }"),
                   {{2, 3, 4}}, 1);
    c.setup();
    ASSERT_EQ(c.layer->params()[0]->count(), shared ? 1 : 3);
    EXPECT_EQ(c.layer->params()[0]->data()[0], 0.25);
    for (int64_t k = 0; k < c.layer->params()[0]->count(); ++k) c.layer->params()[0]->mutable_data()[k] = 0.1 * (k + 1);
    c.forward();
    for (int64_t i = 0; i < 24; ++i) {
      const double x = c.bottom[0]->data()[i], a = shared ? 0.1 : 0.1 * ((i / 4) % 3 + 1);
      EXPECT_DOUBLE_EQ(c.top[0]->data()[i], x > 0 ? x : a * x) << i;
    }
    keep_away(*c.bottom[0], 0, 1e-3);
    check_gradients(*c.layer, c.bottom, c.top);
  }
  expect_in_place_matches("name: 'p' type: 'PReLU' prelu_param { filler { type: 'uniform' min: 0.1 max: 0.5 } }",
                          {2, 3, 5}, {});
}

TEST(Bias, AddsALearnableOffsetPerSliceOfTheChosenAxes) {
  Case<double> c("name: 'b' type: 'Bias' bias_param { axis: 1 num_axes: 2 filler { type: 'gaussian' } }", {{2, 3, 4, 5}}, 1);
  c.setup();
  ASSERT_EQ(c.layer->params()[0]->shape(), (Shape{3, 4}));
  c.forward();
  for (int64_t i = 0; i < c.bottom[0]->count(); ++i)
    EXPECT_DOUBLE_EQ(c.top[0]->data()[i], c.bottom[0]->data()[i] + c.layer->params()[0]->data()[(i / 5) % 12]);
  check_gradients(*c.layer, c.bottom, c.top);
  expect_in_place_matches("name: 'b' type: 'Bias' bias_param { filler { type: 'gaussian' } }", {2, 3, 4}, {});
  Case<double> zero("name: 'b' type: 'Bias'", {{2, 3}}, 1);
  zero.setup();
  EXPECT_EQ(zero.layer->params()[0]->data()[1], 0.0);  // Caffe's filler default: constant 0
}

TEST(Bias, TheTwoBottomFormIsNamed) {
  EXPECT_THAT(error_of<ModelError>([] {
                Case<double> c("name: 'b' type: 'Bias'", {{2, 3}, {3}}, 1);
                c.setup();
              }),
              HasSubstr("two-bottom form"));
}

// Silence keeps an unused top out of the test figures.
TEST(Silence, AnUnreadTopIsNoOutput) {
  const std::string body = R"(
    layer { name: "in" type: "Input" top: "x" top: "label" input_param { shape { dim: 2 dim: 3 } shape { dim: 2 } } }
    layer { name: "ip" type: "InnerProduct" bottom: "x" top: "ip" inner_product_param { num_output: 1 } }
    layer { name: "loss" type: "EuclideanLoss" bottom: "ip" bottom: "label" top: "loss" }
    layer { name: "norm" type: "InnerProduct" bottom: "x" top: "unused" inner_product_param { num_output: 1 } }
  )";
  Net<double> loud(parse_model(body, "s.prototxt"), Phase::Test, default_cpu_device(), 0, 1, "s.prototxt");
  loud.forward({Phase::Test});
  EXPECT_TRUE(loud.scalar_outputs().empty());  // "unused" has two elements: no scalar anyway
  Net<double> quiet(parse_model(body + "layer { name: \"s\" type: \"Silence\" bottom: \"unused\" }", "s.prototxt"),
                    Phase::Test, default_cpu_device(), 0, 1, "s.prototxt");
  quiet.forward({Phase::Test});
  EXPECT_EQ(quiet.layer(quiet.num_layers() - 1).type(), "Silence");
  EXPECT_FALSE(quiet.needs_backward(quiet.num_layers() - 1));
}

}  // namespace
}  // namespace cgdp
