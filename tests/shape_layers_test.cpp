// Reshape, Flatten and Slice: Caffe's shape rules (0 copies, -1 infers, negative axes), the
// elements they move, finite-difference gradients, and the shapes Caffe refuses.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "support/layer_case.hpp"

namespace cgdp {
namespace {

using testing::Case;
using testing::check_gradients;
using testing::error_of;
using ::testing::HasSubstr;

Shape top_shape_of(const std::string& text, const Shape& bottom) {
  Case<double> c(text, {bottom}, 1);
  c.setup();
  return c.top[0]->shape();
}

TEST(Reshape, CaffesShapeRules) {
  const Shape in{2, 3, 4, 5};
  EXPECT_EQ(top_shape_of("name: 'r' type: 'Reshape' reshape_param { shape { dim: 0 dim: -1 } }", in), (Shape{2, 60}));
  EXPECT_EQ(top_shape_of("name: 'r' type: 'Reshape' reshape_param { shape { dim: 6 dim: 20 } }", in), (Shape{6, 20}));
  // axis 1, num_axes 2: only the channel and height axes are replaced.
  EXPECT_EQ(top_shape_of("name: 'r' type: 'Reshape' reshape_param { shape { dim: -1 } axis: 1 num_axes: 2 }", in),
            (Shape{2, 12, 5}));
  // axis -1 appends after the last axis (Caffe's rule): an extra axis of 1.
  EXPECT_EQ(top_shape_of("name: 'r' type: 'Reshape' reshape_param { shape { dim: 1 } axis: -1 }", in),
            (Shape{2, 3, 4, 5, 1}));
  EXPECT_EQ(top_shape_of("name: 'r' type: 'Reshape' reshape_param { shape { } axis: 1 num_axes: 0 }", in), in);
}

TEST(Reshape, ShapesCaffeRefusesAreNamed) {
  const Shape in{2, 3, 4};
  auto error = [&](const std::string& param) {
    return error_of<ModelError>([&] { (void)top_shape_of("name: 'r' type: 'Reshape' reshape_param { " + param + " }", in); });
  };
  EXPECT_THAT(error("shape { dim: -1 dim: -1 }"), HasSubstr("at most one can be inferred"));
  EXPECT_THAT(error("shape { dim: 5 dim: -1 }"), HasSubstr("24 elements do not divide by 5"));
  EXPECT_THAT(error("shape { dim: 5 dim: 5 }"), HasSubstr("output shape 5x5 holds 25 elements, the bottom 2x3x4 holds 24"));
  EXPECT_THAT(error("shape { dim: 0 dim: 0 dim: 0 dim: 0 }"), HasSubstr("the bottom has no axis 3"));
  EXPECT_THAT(error("shape { dim: 24 } axis: 4"), HasSubstr("reshape_param.axis 4 is outside"));
}

TEST(Flatten, AxesAndEndAxis) {
  const Shape in{2, 3, 4, 5};
  EXPECT_EQ(top_shape_of("name: 'f' type: 'Flatten'", in), (Shape{2, 60}));
  EXPECT_EQ(top_shape_of("name: 'f' type: 'Flatten' flatten_param { axis: 1 end_axis: 2 }", in), (Shape{2, 12, 5}));
  EXPECT_EQ(top_shape_of("name: 'f' type: 'Flatten' flatten_param { axis: 0 }", in), (Shape{120}));
  EXPECT_THAT(error_of<ModelError>([&] {
                (void)top_shape_of("name: 'f' type: 'Flatten' flatten_param { axis: 2 end_axis: 1 }", in);
              }),
              HasSubstr("end_axis 1 comes before axis 2"));
}

TEST(ShapeLayers, ElementsKeepTheirOrderAndGradientsPassThrough) {
  for (const char* text : {"name: 'f' type: 'Flatten'", "name: 'r' type: 'Reshape' reshape_param { shape { dim: -1 dim: 4 } }"}) {
    Case<double> c(text, {{2, 3, 4}}, 1);
    c.setup();
    c.forward();
    EXPECT_EQ(c.top_data(), std::vector<double>(c.bottom[0]->data(), c.bottom[0]->data() + 24)) << text;
    check_gradients(*c.layer, c.bottom, c.top);
  }
}

TEST(Slice, AtSlicePointsAndIntoEqualParts) {
  Case<double> c("name: 's' type: 'Slice' slice_param { axis: 1 slice_point: 1 slice_point: 4 }", {{2, 6, 3}}, 3);
  c.setup();
  EXPECT_EQ(c.top[0]->shape(), (Shape{2, 1, 3}));
  EXPECT_EQ(c.top[1]->shape(), (Shape{2, 3, 3}));
  EXPECT_EQ(c.top[2]->shape(), (Shape{2, 2, 3}));
  c.forward();
  // Top 1 of image 1 holds channels 1..3 of image 1: bottom elements 18 + 3..11.
  for (int i = 0; i < 9; ++i) EXPECT_EQ(c.top[1]->data()[9 + i], c.bottom[0]->data()[18 + 3 + i]) << i;
  check_gradients(*c.layer, c.bottom, c.top);
  Case<double> equal("name: 's' type: 'Slice' slice_param { axis: 0 }", {{4, 5}}, 2);
  equal.setup();
  EXPECT_EQ(equal.top[1]->shape(), (Shape{2, 5}));
  check_gradients(*equal.layer, equal.bottom, equal.top);
}

TEST(Slice, SlicePointsCaffeRefusesAreNamed) {
  auto error = [](const std::string& text, int tops) {
    return error_of<ModelError>([&] {
      Case<double> c(text, {{2, 6}}, tops);
      c.setup();
    });
  };
  EXPECT_THAT(error("name: 's' type: 'Slice' slice_param { slice_point: 2 }", 3), HasSubstr("1 slice_point(s) for 3 tops"));
  EXPECT_THAT(error("name: 's' type: 'Slice' slice_param { slice_point: 4 slice_point: 2 }", 3), HasSubstr("must be increasing"));
  EXPECT_THAT(error("name: 's' type: 'Slice'", 4), HasSubstr("axis 1 of size 6 does not split evenly into 4 tops"));
}

}  // namespace
}  // namespace cgdp
