// Crop, ArgMax and MVN: Caffe's outputs on hand-checked cases and float64 references, gradients
// against finite differences, and the settings Caffe refuses.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "support/layer_case.hpp"

namespace cgdp {
namespace {

using testing::Case;
using testing::check_gradients;
using testing::error_of;
using ::testing::HasSubstr;

TEST(Crop, CutsBottomZeroToTheReferencesShapeAtTheOffsets) {
  Case<double> c("name: 'c' type: 'Crop' crop_param { axis: 2 offset: 1 offset: 2 }", {{2, 3, 5, 6}, {1, 1, 3, 2}}, 1);
  c.setup();
  EXPECT_EQ(c.top[0]->shape(), (Shape{2, 3, 3, 2}));
  c.forward();
  // Top (n, ch, h, w) = bottom (n, ch, h + 1, w + 2).
  for (int64_t i = 0; i < c.top[0]->count(); ++i) {
    const int64_t w = i % 2, h = i / 2 % 3, nc = i / 6;
    EXPECT_EQ(c.top[0]->data()[i], c.bottom[0]->data()[(nc * 5 + h + 1) * 6 + w + 2]) << i;
  }
  check_gradients(*c.layer, c.bottom, c.top);  // zero outside the crop
}

TEST(Crop, OneOffsetForEveryAxisAndTheLimits) {
  Case<double> c("name: 'c' type: 'Crop' crop_param { axis: 1 offset: 1 }", {{2, 4, 4}, {2, 2, 3}}, 1);
  c.setup();
  c.forward();
  EXPECT_EQ(c.top[0]->data()[0], c.bottom[0]->data()[1 * 4 + 1]);
  EXPECT_THAT(error_of<ModelError>([] {
                Case<double> bad("name: 'c' type: 'Crop' crop_param { offset: 3 }", {{1, 1, 4, 4}, {1, 1, 2, 2}}, 1);
                bad.setup();
              }),
              HasSubstr("axis 2: offset 3 + size 2 exceeds bottom 0's 4"));
}

TEST(ArgMax, IndicesAndValuesAsCaffeLaysThemOut) {
  Case<double> c("name: 'a' type: 'ArgMax' argmax_param { top_k: 2 out_max_val: true }", {{2, 5}}, 1);
  const double values[] = {0.1, 0.9, 0.3, 0.9, -1, /**/ 5, 4, 3, 2, 1};
  std::copy(values, values + 10, c.bottom[0]->mutable_data());
  c.setup();
  EXPECT_EQ(c.top[0]->shape(), (Shape{2, 2, 2}));
  c.forward();
  // Ties go to the larger index (Caffe sorts (value, index) pairs descending): 3 before 1.
  EXPECT_EQ(c.top_data(), (std::vector<double>{3, 1, 0.9, 0.9, 0, 1, 5, 4}));
  Case<double> along("name: 'a' type: 'ArgMax' argmax_param { axis: 1 }", {{2, 3, 2}}, 1);
  for (int i = 0; i < 12; ++i) along.bottom[0]->mutable_data()[i] = (i * 7) % 5;
  along.setup();
  EXPECT_EQ(along.top[0]->shape(), (Shape{2, 1, 2}));
  along.forward();
  // Sample 0, position 0: values 0, 4, 3 over the axis -> 1; position 1: 2, 1, 0 -> 0.
  EXPECT_EQ(along.top[0]->data()[0], 1.0);
  EXPECT_EQ(along.top[0]->data()[1], 0.0);
  EXPECT_FALSE(along.layer->can_backward_to(0));
  EXPECT_THAT(error_of<ModelError>([] {
                Case<double> bad("name: 'a' type: 'ArgMax' argmax_param { top_k: 6 }", {{2, 5}}, 1);
                bad.setup();
              }),
              HasSubstr("top_k 6 is more than the 5 values"));
}

TEST(MVN, RowsGetZeroMeanAndUnitVarianceAndGradientsMatch) {
  for (const char* across : {"false", "true"})
    for (const char* variance : {"true", "false"}) {
      SCOPED_TRACE(cat("across_channels ", across, " normalize_variance ", variance));
      Case<double> c(cat("name: 'm' type: 'MVN' mvn_param { across_channels: ", across, " normalize_variance: ", variance,
                         " eps: 1e-9 }"),
                     {{2, 3, 4}}, 1);
      c.setup();
      c.forward();
      const int64_t dim = std::string(across) == "true" ? 12 : 4;
      for (int64_t r = 0; r < 24 / dim; ++r) {
        double mean = 0, sq = 0;
        for (int64_t i = 0; i < dim; ++i) mean += c.top[0]->data()[r * dim + i];
        for (int64_t i = 0; i < dim; ++i) sq += std::pow(c.top[0]->data()[r * dim + i], 2);
        EXPECT_NEAR(mean / dim, 0.0, 1e-12);
        if (std::string(variance) == "true") EXPECT_NEAR(sq / dim, 1.0, 1e-6);
      }
      check_gradients(*c.layer, c.bottom, c.top, {.tolerance = 1e-5});
    }
}

}  // namespace
}  // namespace cgdp
