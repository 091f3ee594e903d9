// ReLU, Dropout, BatchNorm, Scale, Eltwise, Concat, Split, Softmax, SoftmaxWithLoss and Accuracy:
// forward against float64 references, backward against finite differences, in-place runs against
// out-of-place ones, and every configuration and data error.
#include <gmock/gmock.h>
#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>

#include "cgdp/device/cpu_device.hpp"
#include "cgdp/layers/registry.hpp"
#include "support/gradient_checker.hpp"
#include "support/layer_case.hpp"

namespace cgdp {
namespace {

using testing::Case;
using testing::check_gradients;
using testing::error_of;
using testing::expect_all_close;
using testing::expect_close;
using testing::expect_in_place_matches;
using testing::keep_away;
using testing::parse_layer;
using testing::set;
using testing::fill_uniform;
using testing::GradientCheckOptions;
using ::testing::HasSubstr;

RunContext test_phase() {
  RunContext ctx;
  ctx.phase = Phase::Test;
  return ctx;
}

// ---------------------------------------------------------------- ReLU

TEST(ReLU, ForwardMatchesHandValues) {
  for (double slope : {0.0, 0.1}) {
    Case c(cat("name: 'r' type: 'ReLU' relu_param { negative_slope: ", slope, " }"), {{2, 3}}, 1);
    c.setup();
    set(*c.bottom[0], {-2, -0.5, 0, 0.5, 1, 3});
    c.forward();
    const double s = static_cast<float>(slope);  // the model file holds a float
    expect_all_close(c.top_data(), {-2 * s, -0.5 * s, 0, 0.5, 1, 3});
  }
}

TEST(ReLU, GradientsMatchFiniteDifferences) {
  for (double slope : {0.0, 0.2, -0.3}) {
    Case c(cat("name: 'r' type: 'ReLU' relu_param { negative_slope: ", slope, " }"), {{2, 3, 2, 2}},
           1);
    keep_away(*c.bottom[0], 0, 0.05);
    c.setup();
    check_gradients(*c.layer, c.bottom, c.top);
  }
}

TEST(ReLU, InPlaceMatchesOutOfPlace) {
  expect_in_place_matches("name: 'r' type: 'ReLU'", {3, 4, 2}, {});
  expect_in_place_matches("name: 'r' type: 'ReLU' relu_param { negative_slope: 0.1 }", {3, 4}, {});
}

TEST(ReLU, InPlaceWithNegativeSlopeIsAModelError) {
  Case c("name: 'r' type: 'ReLU' relu_param { negative_slope: -1 }", {{2, 2}}, 0);
  c.top = {c.bottom[0]};
  EXPECT_THAT(error_of<ModelError>([&] { c.setup(); }),
              HasSubstr("layer 'r' (ReLU): cannot run in place"));
}

// ---------------------------------------------------------------- Dropout

const char kDropout[] = "name: 'drop1' type: 'Dropout' dropout_param { dropout_ratio: 0.4 }";

RunContext train_step(uint64_t seed, int64_t iteration, int64_t sample_offset = 0) {
  RunContext ctx;
  ctx.seed = seed;
  ctx.iteration = iteration;
  ctx.sample_offset = sample_offset;
  return ctx;
}

TEST(Dropout, SlicesOfAGlobalBatchDrawTheMasksOfTheWholeBatch) {
  Case whole(kDropout, {{8, 3, 5}}, 1);
  whole.setup();
  whole.forward(train_step(42, 17));
  const std::vector<double> all = whole.top_data();
  const int64_t per_half = 4 * 3 * 5;
  for (int half = 0; half < 2; ++half) {
    Case part(kDropout, {{4, 3, 5}}, 1);
    part.setup();
    const double* x = whole.bottom[0]->data() + half * per_half;
    std::copy(x, x + per_half, part.bottom[0]->mutable_data());
    part.forward(train_step(42, 17, 4 * half));
    EXPECT_EQ(part.top_data(), std::vector<double>(all.begin() + half * per_half,
                                                   all.begin() + (half + 1) * per_half))
        << "half " << half;
  }
  const auto zeros = std::count(all.begin(), all.end(), 0.0);
  EXPECT_GT(zeros, 0);
  EXPECT_LT(zeros, static_cast<int64_t>(all.size()));
}

// Fraction of positions where two dropout outputs of an all-ones input differ in being kept.
double mask_difference(const std::vector<double>& a, const std::vector<double>& b) {
  int64_t differ = 0;
  for (size_t i = 0; i < a.size(); ++i) differ += (a[i] == 0) != (b[i] == 0);
  return static_cast<double>(differ) / static_cast<double>(a.size());
}

TEST(Dropout, MasksDependOnIterationSeedAndLayerNameOnly) {
  auto run = [](const std::string& text, const RunContext& ctx) {
    Case c(text, {{4, 500}}, 1);
    std::fill_n(c.bottom[0]->mutable_data(), c.bottom[0]->count(), 1.0);
    c.setup();
    c.forward(ctx);
    return c.top_data();
  };
  const auto base = run(kDropout, train_step(1, 3));
  EXPECT_EQ(run(kDropout, train_step(1, 3)), base);
  // Two independent masks with p = 0.4 disagree at 2 * 0.4 * 0.6 = 48% of positions
  // (standard deviation 1.1% over 2000 positions).
  const std::string renamed = "name: 'drop2' type: 'Dropout' dropout_param { dropout_ratio: 0.4 }";
  for (double d : {mask_difference(base, run(kDropout, train_step(1, 4))),
                   mask_difference(base, run(kDropout, train_step(2, 3))),
                   mask_difference(base, run(renamed, train_step(1, 3)))})
    EXPECT_NEAR(d, 0.48, 0.05);
}

TEST(Dropout, KeepsAboutOneMinusRatioScaledByItsInverse) {
  for (double p : {0.1, 0.5, 0.8}) {
    Case<float> c(cat("name: 'd' type: 'Dropout' dropout_param { dropout_ratio: ", p, " }"),
                  {{64, 1000}}, 1);
    std::fill_n(c.bottom[0]->mutable_data(), c.bottom[0]->count(), 1.f);
    c.setup();
    c.forward(train_step(9, 1));
    const float scale =
        static_cast<float>(1.0 / (1.0 - static_cast<double>(static_cast<float>(p))));
    int64_t kept = 0;
    for (float v : c.top_data()) {
      ASSERT_TRUE(v == 0.f || v == scale) << v;
      kept += v != 0.f;
    }
    // 64000 draws: the standard deviation of the fraction is below 0.002.
    EXPECT_NEAR(static_cast<double>(kept) / 64000.0, 1.0 - p, 0.01) << "dropout_ratio " << p;
  }
}

TEST(Dropout, TestPhaseIsIdentity) {
  Case c(kDropout, {{3, 7}}, 1);
  c.setup();
  c.forward(test_phase());
  EXPECT_EQ(c.top_data(), std::vector<double>(c.bottom[0]->data(), c.bottom[0]->data() + 21));
  std::fill_n(c.top[0]->mutable_diff(), 21, 2.5);
  c.layer->backward(test_phase(), c.top, {true}, c.bottom);
  for (double g : c.bottom[0]->diff_span()) EXPECT_EQ(g, 2.5);
}

TEST(Dropout, GradientsMatchFiniteDifferences) {
  Case c(kDropout, {{4, 3, 2}}, 1);
  c.setup();
  check_gradients(*c.layer, c.bottom, c.top, {}, train_step(3, 8));
}

TEST(Dropout, InPlaceMatchesOutOfPlace) {
  expect_in_place_matches(kDropout, {4, 6}, train_step(5, 2));
  expect_in_place_matches(kDropout, {4, 6}, test_phase());
}

TEST(Dropout, RatioOutsideZeroToOneIsAModelError) {
  for (const char* ratio : {"1", "-0.1", "1.5"}) {
    Case c(cat("name: 'd' type: 'Dropout' dropout_param { dropout_ratio: ", ratio, " }"), {{2}}, 1);
    EXPECT_THAT(error_of<ModelError>([&] { c.setup(); }),
                HasSubstr("layer 'd' (Dropout): dropout_ratio must be in [0, 1)"));
  }
}

// ---------------------------------------------------------------- BatchNorm

const char kBatchNorm[] =
    "name: 'bn' type: 'BatchNorm' batch_norm_param { moving_average_fraction: 0.9 eps: 1e-3 }";

std::string batch_norm_with(bool use_global_stats) {
  return cat("name: 'bn' type: 'BatchNorm' batch_norm_param { moving_average_fraction: 0.9 ",
             "eps: 1e-3 use_global_stats: ", use_global_stats ? "true" : "false", " }");
}

// Per-channel mean and biased variance of an N x C x S blob, straight from the definition.
// The model file's values as its float fields hold them.
const double kEps = 1e-3f;
const double kFraction = 0.9f;

std::pair<std::vector<double>, std::vector<double>> channel_stats(const Blob<double>& x) {
  const int64_t n = x.shape(0), c = x.shape(1), s = x.count(2);
  std::vector<double> mean(c, 0), var(c, 0);
  for (int64_t ch = 0; ch < c; ++ch) {
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < s; ++j) mean[ch] += x.data()[(i * c + ch) * s + j] / (n * s);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < s; ++j)
        var[ch] += std::pow(x.data()[(i * c + ch) * s + j] - mean[ch], 2) / (n * s);
  }
  return {mean, var};
}

std::vector<double> normalized(const Blob<double>& x, const std::vector<double>& mean,
                               const std::vector<double>& var, double eps) {
  const int64_t c = x.shape(1), s = x.count(2);
  std::vector<double> y(x.count());
  for (int64_t i = 0; i < x.count(); ++i) {
    const int64_t ch = i / s % c;
    y[i] = (x.data()[i] - mean[ch]) / std::sqrt(var[ch] + eps);
  }
  return y;
}

TEST(BatchNorm, HasNoParamsAndCaffesThreeStateBlobs) {
  Case c(kBatchNorm, {{2, 3, 4}}, 1);
  c.setup();
  EXPECT_TRUE(c.layer->params().empty());
  ASSERT_EQ(c.layer->state().size(), 3u);
  EXPECT_EQ(c.layer->state()[0]->shape(), Shape({3}));
  EXPECT_EQ(c.layer->state()[1]->shape(), Shape({3}));
  EXPECT_EQ(c.layer->state()[2]->shape(), Shape({1}));
}

TEST(BatchNorm, RunningStatisticsAfterTwoForwardsMatchCaffesUpdate) {
  Case c(kBatchNorm, {{2, 2, 3}}, 1);
  c.setup();
  set(*c.bottom[0], {1, 2, 3, -1, 0, 1, 4, 5, 9, 2, 2, 5});
  const auto [mean1, var1] = channel_stats(*c.bottom[0]);
  c.forward();
  expect_all_close(c.top_data(), normalized(*c.bottom[0], mean1, var1, kEps));
  set(*c.bottom[0], {0, 0, 6, 1, 1, 1, -3, 3, 0, 2, 4, 8});
  const auto [mean2, var2] = channel_stats(*c.bottom[0]);
  c.forward();
  // Hand check of the first channel's batch statistics: values {1,2,3,4,5,9}, then {0,0,6,-3,3,0}.
  expect_close(mean1[0], 4.0);
  expect_close(var1[0], 40.0 / 6);
  expect_close(mean2[0], 1.0);
  expect_close(var2[0], 48.0 / 6);
  const double m = 6, correction = m / (m - 1);
  auto& state = c.layer->state();
  expect_close(state[2]->data()[0], kFraction * 1 + 1);
  for (int ch = 0; ch < 2; ++ch) {
    expect_close(state[0]->data()[ch], kFraction * mean1[ch] + mean2[ch]);
    expect_close(state[1]->data()[ch], kFraction * correction * var1[ch] + correction * var2[ch]);
  }
  // The test phase uses them by default: mean = sum / factor, variance likewise.
  c.forward(test_phase());
  const double factor = state[2]->data()[0];
  const std::vector<double> mean = {state[0]->data()[0] / factor, state[0]->data()[1] / factor};
  const std::vector<double> var = {state[1]->data()[0] / factor, state[1]->data()[1] / factor};
  expect_all_close(c.top_data(), normalized(*c.bottom[0], mean, var, kEps));
  expect_close(state[2]->data()[0], kFraction + 1);  // the test forward left them alone
}

TEST(BatchNorm, UseGlobalStatsFieldOverridesThePhase) {
  Case c(batch_norm_with(false), {{4, 2, 2}}, 1);
  c.setup();
  c.forward(test_phase());
  const auto [mean, var] = channel_stats(*c.bottom[0]);
  expect_all_close(c.top_data(), normalized(*c.bottom[0], mean, var, kEps));
  EXPECT_EQ(c.layer->state()[2]->data()[0], 1.0);

  Case g(batch_norm_with(true), {{4, 2, 2}}, 1);
  g.setup();
  set(*g.layer->state()[0], {2, -4});
  set(*g.layer->state()[1], {8, 2});
  set(*g.layer->state()[2], {2});
  g.forward();  // training phase, but the field wins
  expect_all_close(g.top_data(), normalized(*g.bottom[0], {1, -2}, {4, 1}, kEps));
  EXPECT_EQ(g.layer->state()[2]->data()[0], 2.0);
}

TEST(BatchNorm, GradientsMatchFiniteDifferencesInBothModes) {
  for (const Shape& shape : {Shape{3, 2, 2, 2}, Shape{5, 3}}) {
    Case c(kBatchNorm, {shape}, 1);
    c.setup();
    check_gradients(*c.layer, c.bottom, c.top);
    set(*c.layer->state()[0], std::vector<double>(shape[1], 0.6));
    set(*c.layer->state()[1], std::vector<double>(shape[1], 1.4));
    set(*c.layer->state()[2], {2});
    check_gradients(*c.layer, c.bottom, c.top, {}, test_phase());
  }
}

TEST(BatchNorm, InPlaceMatchesOutOfPlace) {
  expect_in_place_matches(kBatchNorm, {3, 2, 4}, {});
  expect_in_place_matches(kBatchNorm, {3, 2, 4}, test_phase());
}

TEST(BatchNorm, ChannelCountChangeIsAModelError) {
  Case c(kBatchNorm, {{2, 3, 4}}, 1);
  c.setup();
  c.bottom[0]->reshape({2, 5, 4});
  EXPECT_THAT(error_of<ModelError>([&] { c.layer->reshape(c.bottom, c.top); }),
              HasSubstr("layer 'bn' (BatchNorm): bottom of shape 2x5x4 has 5 channels, but the "
                        "running statistics have 3"));
}

// ---------------------------------------------------------------- Scale

TEST(Scale, ForwardMatchesHandValuesAndFillsLikeCaffe) {
  Case c("name: 's' type: 'Scale' scale_param { bias_term: true }", {{2, 3, 2}}, 1);
  c.setup();
  ASSERT_EQ(c.layer->params().size(), 2u);
  EXPECT_EQ(c.layer->params()[0]->shape(), Shape({3}));
  for (double v : c.layer->params()[0]->data_span()) EXPECT_EQ(v, 1.0);  // default scale 1
  for (double v : c.layer->params()[1]->data_span()) EXPECT_EQ(v, 0.0);  // default bias 0
  set(*c.layer->params()[0], {1, 2, 3});
  set(*c.layer->params()[1], {0.5, 0, -1});
  set(*c.bottom[0], {1, 2, 3, 4, 5, 6, -1, -2, -3, -4, -5, -6});
  c.forward();
  expect_all_close(c.top_data(), {1.5, 2.5, 6, 8, 14, 17, -0.5, -1.5, -6, -8, -16, -19});
}

TEST(Scale, GradientsMatchFiniteDifferences) {
  const std::vector<std::pair<std::string, Shape>> configs = {
      {"bias_term: true filler { type: 'uniform' min: -1 max: 1 }", {2, 3, 2, 2}},
      {"num_axes: 2 filler { type: 'gaussian' }", {2, 3, 2, 2}},
      {"axis: 0 num_axes: -1 bias_term: true bias_filler { type: 'uniform' }", {2, 3, 2}},
      {"num_axes: 0 filler { value: 1.5 } bias_term: true", {3, 4}},
      {"axis: -1 filler { type: 'uniform' }", {2, 3, 4}},
  };
  for (const auto& [field, shape] : configs) {
    SCOPED_TRACE(field);
    Case c(cat("name: 's' type: 'Scale' scale_param { ", field, " }"), {shape}, 1);
    c.setup();
    check_gradients(*c.layer, c.bottom, c.top);
  }
}

TEST(Scale, InPlaceMatchesOutOfPlace) {
  expect_in_place_matches(
      "name: 's' type: 'Scale' scale_param { bias_term: true filler { type: 'uniform' } }",
      {2, 3, 4}, {});
}

TEST(Scale, BadAxesAreModelErrors) {
  Case wide("name: 's' type: 'Scale' scale_param { axis: 1 num_axes: 3 }", {{2, 3, 4}}, 1);
  EXPECT_THAT(error_of<ModelError>([&] { wide.setup(); }),
              HasSubstr("layer 's' (Scale): axis 1 + num_axes 3 exceeds the 3 axes of bottom "
                        "shape 2x3x4"));
  Case far("name: 's' type: 'Scale' scale_param { axis: 3 }", {{2, 3, 4}}, 1);
  EXPECT_THAT(error_of<ModelError>([&] { far.setup(); }),
              HasSubstr("layer 's' (Scale): axis 3 is out of range for bottom shape 2x3x4"));
  Case c("name: 's' type: 'Scale'", {{2, 3, 4}}, 1);
  c.setup();
  c.bottom[0]->reshape({2, 5, 4});
  EXPECT_THAT(error_of<ModelError>([&] { c.layer->reshape(c.bottom, c.top); }),
              HasSubstr("bottom shape 2x5x4 does not match scale shape 3 at axis 1"));
}

// ---------------------------------------------------------------- Eltwise

TEST(Eltwise, ForwardMatchesHandValues) {
  const std::vector<std::pair<std::string, std::vector<double>>> cases = {
      {"operation: SUM", {6, 4, 7, 1}},
      {"operation: SUM coeff: 1 coeff: -2 coeff: 0.5", {-4, -3.5, 2.5, -4.5}},
      {"operation: PROD", {6, -6, 9, 0}},
      {"operation: MAX", {3, 3, 3, 2}},
  };
  for (const auto& [field, want] : cases) {
    SCOPED_TRACE(field);
    Case c(cat("name: 'e' type: 'Eltwise' eltwise_param { ", field, " }"), {{2, 2}, {2, 2}, {2, 2}},
           1);
    c.setup();
    set(*c.bottom[0], {1, -1, 3, 0});
    set(*c.bottom[1], {3, 2, 1, 2});
    set(*c.bottom[2], {2, 3, 3, -1});
    c.forward();
    expect_all_close(c.top_data(), want);
  }
}

TEST(Eltwise, GradientsMatchFiniteDifferences) {
  for (const char* field : {"operation: SUM", "operation: SUM coeff: 0.5 coeff: -2 coeff: 3",
                            "operation: PROD", "operation: MAX"}) {
    SCOPED_TRACE(field);
    Case c(cat("name: 'e' type: 'Eltwise' eltwise_param { ", field, " }"),
           {{2, 3, 2}, {2, 3, 2}, {2, 3, 2}}, 1);
    // MAX needs distinct inputs: a finite difference must not flip the winner.
    for (int64_t i = 0; i < 12; ++i)
      for (int a = 0; a < 3; ++a)
        for (int b = a + 1; b < 3; ++b)
          ASSERT_GT(std::abs(c.bottom[a]->data()[i] - c.bottom[b]->data()[i]), 1e-3);
    c.setup();
    check_gradients(*c.layer, c.bottom, c.top);
  }
}

TEST(Eltwise, MaxSendsTheGradientToTheWinnerOnly) {
  Case c("name: 'e' type: 'Eltwise' eltwise_param { operation: MAX }", {{3}, {3}}, 1);
  c.setup();
  set(*c.bottom[0], {1, 5, 2});
  set(*c.bottom[1], {4, 0, 2});  // a tie goes to the first bottom, as in Caffe
  c.forward();
  std::fill_n(c.top[0]->mutable_diff(), 3, 1.0);
  c.layer->backward({}, c.top, {true, true}, c.bottom);
  EXPECT_EQ(std::vector<double>(c.bottom[0]->diff(), c.bottom[0]->diff() + 3),
            std::vector<double>({0, 1, 1}));
  EXPECT_EQ(std::vector<double>(c.bottom[1]->diff(), c.bottom[1]->diff() + 3),
            std::vector<double>({1, 0, 0}));
}

TEST(Eltwise, BadConfigurationsAreModelErrors) {
  Case shapes("name: 'e' type: 'Eltwise'", {{2, 3}, {2, 3}, {3, 2}}, 1);
  EXPECT_THAT(error_of<ModelError>([&] { shapes.setup(); }),
              HasSubstr("layer 'e' (Eltwise): bottom 2 has shape 3x2 but bottom 0 has shape 2x3"));
  Case coeffs("name: 'e' type: 'Eltwise' eltwise_param { coeff: 1 }", {{2}, {2}}, 1);
  EXPECT_THAT(error_of<ModelError>([&] { coeffs.setup(); }),
              HasSubstr("has 1 coeff for 2 bottoms"));
  Case prod("name: 'e' type: 'Eltwise' eltwise_param { operation: PROD coeff: 1 coeff: 2 }",
            {{2}, {2}}, 1);
  EXPECT_THAT(error_of<ModelError>([&] { prod.setup(); }),
              HasSubstr("coeff only for operation SUM"));
  Case one("name: 'e' type: 'Eltwise'", {{2}}, 1);
  EXPECT_THAT(error_of<ModelError>([&] { one.setup(); }),
              HasSubstr("takes at least 2 bottom(s), got 1"));
}

// ---------------------------------------------------------------- Concat

TEST(Concat, ForwardMatchesHandValuesOnAxes0And1) {
  Case c("name: 'c' type: 'Concat'", {{2, 1, 2}, {2, 2, 2}}, 1);
  c.setup();
  EXPECT_EQ(c.top[0]->shape(), Shape({2, 3, 2}));
  set(*c.bottom[0], {1, 2, 3, 4});
  set(*c.bottom[1], {5, 6, 7, 8, 9, 10, 11, 12});
  c.forward();
  expect_all_close(c.top_data(), {1, 2, 5, 6, 7, 8, 3, 4, 9, 10, 11, 12});

  Case n("name: 'c' type: 'Concat' concat_param { axis: 0 }", {{1, 2}, {2, 2}}, 1);
  n.setup();
  set(*n.bottom[0], {1, 2});
  set(*n.bottom[1], {3, 4, 5, 6});
  n.forward();
  EXPECT_EQ(n.top[0]->shape(), Shape({3, 2}));
  expect_all_close(n.top_data(), {1, 2, 3, 4, 5, 6});
}

TEST(Concat, GradientsMatchFiniteDifferences) {
  const std::vector<std::pair<int, std::vector<Shape>>> configs = {
      {0, {{1, 3, 2}, {2, 3, 2}, {3, 3, 2}}},
      {1, {{2, 1, 2}, {2, 3, 2}, {2, 2, 2}}},
      {-1, {{2, 3, 1}, {2, 3, 2}}},
  };
  for (const auto& [axis, shapes] : configs) {
    SCOPED_TRACE(axis);
    Case c(cat("name: 'c' type: 'Concat' concat_param { axis: ", axis, " }"), shapes, 1);
    c.setup();
    check_gradients(*c.layer, c.bottom, c.top);
  }
}

TEST(Concat, MismatchedShapesAreModelErrors) {
  Case c("name: 'c' type: 'Concat'", {{2, 3, 4}, {2, 5, 5}}, 1);
  EXPECT_THAT(error_of<ModelError>([&] { c.setup(); }),
              HasSubstr("layer 'c' (Concat): bottom 1 has shape 2x5x5 but bottom 0 has shape "
                        "2x3x4; all axes but the concat axis 1 must match"));
  Case rank("name: 'c' type: 'Concat'", {{2, 3, 4}, {2, 3}}, 1);
  EXPECT_THAT(error_of<ModelError>([&] { rank.setup(); }),
              HasSubstr("bottom 1 has shape 2x3 but bottom 0 has shape 2x3x4"));
  Case axis("name: 'c' type: 'Concat' concat_param { axis: 2 }", {{2, 3}, {2, 3}}, 1);
  EXPECT_THAT(error_of<ModelError>([&] { axis.setup(); }),
              HasSubstr("layer 'c' (Concat): axis 2 is out of range for bottom shape 2x3"));
}

// ---------------------------------------------------------------- Split

TEST(Split, CopiesForwardAndSumsBackward) {
  Case c("name: 'sp' type: 'Split'", {{2, 3}}, 3);
  c.setup();
  c.forward();
  for (int t = 0; t < 3; ++t)
    EXPECT_EQ(c.top_data(t), std::vector<double>(c.bottom[0]->data(), c.bottom[0]->data() + 6));
  for (int t = 0; t < 3; ++t) std::fill_n(c.top[t]->mutable_diff(), 6, 1.0 + t);
  c.layer->backward({}, c.top, {true}, c.bottom);
  for (double g : c.bottom[0]->diff_span()) EXPECT_EQ(g, 6.0);
  check_gradients(*c.layer, c.bottom, c.top);
}

// ---------------------------------------------------------------- Softmax

// Softmax of `x` along `axis`, in float64, by the definition.
std::vector<double> softmax_reference(const Blob<double>& x, int axis) {
  const int64_t outer = x.count(0, axis), classes = x.shape(axis), inner = x.count(axis + 1);
  std::vector<double> y(x.count());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      double sum = 0;
      for (int64_t c = 0; c < classes; ++c)
        sum += std::exp(x.data()[(o * classes + c) * inner + i]);
      for (int64_t c = 0; c < classes; ++c) {
        const int64_t at = (o * classes + c) * inner + i;
        y[at] = std::exp(x.data()[at]) / sum;
      }
    }
  return y;
}

TEST(Softmax, ForwardMatchesReference) {
  for (int axis : {0, 1, 2}) {
    Case c(cat("name: 'sm' type: 'Softmax' softmax_param { axis: ", axis, " }"), {{2, 3, 4}}, 1);
    c.setup();
    c.forward();
    expect_all_close(c.top_data(), softmax_reference(*c.bottom[0], axis));
  }
  Case big("name: 'sm' type: 'Softmax'", {{1, 3}}, 1);  // no overflow for large scores
  big.setup();
  set(*big.bottom[0], {1000, 1000, 1000 + std::log(2.0)});
  big.forward();
  expect_all_close(big.top_data(), {0.25, 0.25, 0.5});
}

TEST(Softmax, GradientsMatchFiniteDifferences) {
  for (int axis : {1, -1, 0}) {
    Case c(cat("name: 'sm' type: 'Softmax' softmax_param { axis: ", axis, " }"), {{2, 3, 2, 2}}, 1);
    c.setup();
    check_gradients(*c.layer, c.bottom, c.top);
  }
}

TEST(Softmax, InPlaceMatchesOutOfPlace) {
  expect_in_place_matches("name: 'sm' type: 'Softmax'", {2, 4, 3}, {});
}

// ---------------------------------------------------------------- SoftmaxWithLoss

std::string loss_text(const std::string& loss_fields, int axis = 1) {
  return cat("name: 'loss' type: 'SoftmaxWithLoss' softmax_param { axis: ", axis,
             " } loss_param { ", loss_fields, " }");
}

TEST(SoftmaxWithLoss, ForwardMatchesReferenceForEachNormalization) {
  // 2 samples x 3 classes x 2 positions; one label ignored (-1), so 3 valid of 4.
  const std::vector<double> labels = {2, -1, 0, 1};
  const std::vector<std::pair<std::string, double>> modes = {{"normalization: VALID", 3},
                                                             {"normalization: FULL", 4},
                                                             {"normalization: BATCH_SIZE", 2},
                                                             {"normalization: NONE", 1},
                                                             {"normalize: true", 3},
                                                             {"normalize: false", 2},
                                                             {"", 3}};
  for (const auto& [mode, divisor] : modes) {
    SCOPED_TRACE(mode);
    Case c(loss_text(cat("ignore_label: -1 ", mode)), {{2, 3, 2}, {2, 2}}, 2);
    set(*c.bottom[1], labels);
    c.setup();
    EXPECT_TRUE(c.layer->is_loss());
    EXPECT_EQ(c.top[0]->shape(), Shape({}));
    c.forward();
    const auto prob = softmax_reference(*c.bottom[0], 1);
    double loss = 0;
    for (int64_t pos = 0; pos < 4; ++pos)
      if (labels[pos] >= 0)
        loss -= std::log(prob[(pos / 2 * 3 + static_cast<int64_t>(labels[pos])) * 2 + pos % 2]);
    expect_close(c.top[0]->data()[0], loss / divisor);
    expect_all_close(c.top_data(1), prob);
  }
}

TEST(SoftmaxWithLoss, GradientsMatchFiniteDifferences) {
  for (const char* mode : {"VALID", "FULL", "BATCH_SIZE", "NONE"}) {
    SCOPED_TRACE(mode);
    Case c(loss_text(cat("ignore_label: 1 normalization: ", mode)), {{3, 4, 2}, {3, 1, 2}}, 1);
    set(*c.bottom[1], {0, 1, 3, 2, 1, 0});
    c.setup();
    check_gradients(*c.layer, c.bottom, c.top);
    // Ignored positions get no gradient at all.
    EXPECT_EQ(c.bottom[0]->diff()[1], 0.0);
    EXPECT_EQ(c.bottom[0]->diff()[3], 0.0);
  }
  Case last(loss_text("", -1), {{2, 2, 3}, {4}}, 1);  // classes on the last axis
  set(*last.bottom[1], {0, 2, 1, 1});
  last.setup();
  check_gradients(*last.layer, last.bottom, last.top);
}

TEST(SoftmaxWithLoss, AllIgnoredGivesZeroLossNotNaN) {
  Case c(loss_text("ignore_label: 0"), {{2, 3}, {2}}, 1);
  set(*c.bottom[1], {0, 0});
  c.setup();
  c.forward();
  EXPECT_EQ(c.top[0]->data()[0], 0.0);
}

TEST(SoftmaxWithLoss, CannotBackpropagateToTheLabels) {
  Case c(loss_text(""), {{2, 3}, {2}}, 1);
  set(*c.bottom[1], {0, 2});
  c.setup();
  EXPECT_TRUE(c.layer->can_backward_to(0));
  EXPECT_FALSE(c.layer->can_backward_to(1));
  c.forward();
  c.top[0]->mutable_diff()[0] = 1;
  EXPECT_THAT(error_of<ModelError>([&] {
                c.layer->backward({}, c.top, {true, true}, c.bottom);
              }),
              HasSubstr("layer 'loss' (SoftmaxWithLoss): cannot backpropagate to the labels"));
}

TEST(SoftmaxWithLoss, BadLabelsAreDataErrorsNamingSampleValueAndRange) {
  const std::vector<std::pair<double, std::string>> bad = {
      {2.5, "label 2.5 of sample 1 is not an integer class in [0, 3)"},
      {3, "label 3 of sample 1 is not an integer class in [0, 3)"},
      {-1, "label -1 of sample 1 is not an integer class in [0, 3) nor ignore_label 7"},
      {NAN, "label nan of sample 1"},
  };
  for (const auto& [value, message] : bad) {
    Case c(loss_text("ignore_label: 7"), {{3, 3}, {3}}, 1);
    set(*c.bottom[1], {0, value, 1});
    c.setup();
    EXPECT_THAT(error_of<DataError>([&] { c.forward(); }),
                HasSubstr(cat("layer 'loss' (SoftmaxWithLoss): ", message)));
  }
}

TEST(SoftmaxWithLoss, LabelCountMismatchIsAModelErrorAtReshape) {
  Case c(loss_text(""), {{2, 3, 2}, {2}}, 1);
  EXPECT_THAT(error_of<ModelError>([&] { c.setup(); }),
              HasSubstr("layer 'loss' (SoftmaxWithLoss): label blob of shape 2 holds 2 labels, "
                        "but predictions of shape 2x3x2 with classes on axis 1 need 4"));
}

// ---------------------------------------------------------------- Accuracy

TEST(Accuracy, TopKWithTiesCountingAgainst) {
  const std::vector<double> scores = {0.1, 0.5, 0.4, 0.7, 0.2, 0.1, 0.3, 0.3, 0.4, 0.2, 0.5, 0.3};
  const std::vector<std::pair<std::string, double>> cases = {
      {"top_k: 1", 0.25},
      {"top_k: 2", 0.5},  // sample 2's label ties for second place: a miss, as in Caffe
      {"top_k: 3", 1.0},
      {"ignore_label: 2", 1.0 / 2},  // samples 1 and 3 ignored
  };
  for (const auto& [field, want] : cases) {
    SCOPED_TRACE(field);
    Case c(cat("name: 'acc' type: 'Accuracy' accuracy_param { ", field, " }"), {{4, 3}, {4}}, 1);
    set(*c.bottom[0], scores);
    set(*c.bottom[1], {1, 2, 0, 2});
    c.setup();
    c.forward();
    expect_close(c.top[0]->data()[0], want);
  }
}

// A NaN score, the label's or another class's, makes its sample a miss: comparisons with NaN
// are false, and NaN weights had reported "test accuracy 1".
TEST(Accuracy, ARowHoldingNaNIsAMiss) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Case c("name: 'acc' type: 'Accuracy'", {{3, 3}, {3}}, 1);
  set(*c.bottom[0], {nan, nan, nan, 0.1, 0.9, nan, 0.1, 0.9, 0.2});
  set(*c.bottom[1], {0, 1, 1});
  c.setup();
  c.forward();
  expect_close(c.top[0]->data()[0], 1.0 / 3);  // only the last sample, which holds no NaN
}

TEST(Accuracy, SpatialPositionsAndNoGradient) {
  Case c("name: 'acc' type: 'Accuracy'", {{1, 2, 3}, {1, 1, 3}}, 1);
  set(*c.bottom[0], {0.9, 0.2, 0.4, 0.1, 0.8, 0.6});
  set(*c.bottom[1], {0, 0, 1});
  c.setup();
  c.forward();
  expect_close(c.top[0]->data()[0], 2.0 / 3);
  EXPECT_FALSE(c.layer->can_backward_to(0));
  EXPECT_FALSE(c.layer->can_backward_to(1));
  std::fill_n(c.bottom[0]->mutable_diff(), 6, 7.0);
  c.layer->backward({}, c.top, {false, false}, c.bottom);
  for (double g : c.bottom[0]->diff_span()) EXPECT_EQ(g, 7.0);
}

TEST(Accuracy, BadConfigurationAndLabelsAreReported) {
  Case k("name: 'acc' type: 'Accuracy' accuracy_param { top_k: 4 }", {{2, 3}, {2}}, 1);
  EXPECT_THAT(error_of<ModelError>([&] { k.setup(); }),
              HasSubstr("layer 'acc' (Accuracy): top_k 4 exceeds the 3 classes"));
  Case n("name: 'acc' type: 'Accuracy'", {{2, 3}, {3}}, 1);
  EXPECT_THAT(error_of<ModelError>([&] { n.setup(); }),
              HasSubstr("layer 'acc' (Accuracy): label blob of shape 3 holds 3 labels"));
  Case v("name: 'acc' type: 'Accuracy'", {{2, 3}, {2}}, 1);
  set(*v.bottom[1], {1, 5});
  v.setup();
  EXPECT_THAT(error_of<DataError>([&] { v.forward(); }),
              HasSubstr("layer 'acc' (Accuracy): label 5 of sample 1 is not an integer class in "
                        "[0, 3)"));
}

// ---------------------------------------------------------------- float vs float64, registry

// Runs each layer in float and in double on the same inputs and compares tops and bottom diffs.
TEST(MiscLayers, FloatMatchesDouble) {
  const std::vector<std::pair<std::string, std::vector<Shape>>> configs = {
      {"type: 'ReLU' relu_param { negative_slope: 0.1 }", {{4, 5}}},
      {"type: 'Dropout'", {{4, 5}}},
      {"type: 'BatchNorm'", {{4, 3, 2}}},
      {"type: 'Scale' scale_param { bias_term: true filler { type: 'uniform' } }", {{4, 3, 2}}},
      {"type: 'Eltwise' eltwise_param { operation: PROD }", {{4, 5}, {4, 5}}},
      {"type: 'Concat'", {{2, 3}, {2, 2}}},
      {"type: 'Split'", {{4, 5}}},
      {"type: 'Softmax'", {{4, 5, 2}}},
  };
  for (const auto& [text, shapes] : configs) {
    SCOPED_TRACE(text);
    Case<double> d(cat("name: 'x' ", text), shapes, 1);
    Case<float> f(cat("name: 'x' ", text), shapes, 1);
    d.setup();
    f.setup();
    d.forward(train_step(1, 1));
    f.forward(train_step(1, 1));
    Blob<double>& dy = d.add(d.top[0]->shape());
    fill_uniform(dy, -1, 1, 3);
    for (int64_t i = 0; i < dy.count(); ++i) {
      d.top[0]->mutable_diff()[i] = dy.data()[i];
      f.top[0]->mutable_diff()[i] = static_cast<float>(dy.data()[i]);
    }
    const std::vector<bool> down(shapes.size(), true);
    d.layer->backward(train_step(1, 1), d.top, down, d.bottom);
    f.layer->backward(train_step(1, 1), f.top, down, f.bottom);
    const auto want = d.top_data();
    const auto got = f.top_data();
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_NEAR(got[i], want[i], 1e-5 * (1 + std::abs(want[i])));
    for (size_t b = 0; b < shapes.size(); ++b)
      for (int64_t i = 0; i < d.bottom[b]->count(); ++i)
        EXPECT_NEAR(f.bottom[b]->diff()[i], d.bottom[b]->diff()[i],
                    1e-5 * (1 + std::abs(d.bottom[b]->diff()[i])));
  }
}

TEST(MiscLayers, AreRegistered) {
  for (const char* type : {"Accuracy", "BatchNorm", "Concat", "Dropout", "Eltwise", "ReLU", "Scale",
                           "Softmax", "SoftmaxWithLoss", "Split"}) {
    auto layer =
        create_layer<float>(parse_layer(cat("name: 'x' type: '", type, "'")), default_cpu_device());
    EXPECT_EQ(layer->type(), type);
    const auto known = known_layer_types();
    EXPECT_NE(std::find(known.begin(), known.end(), type), known.end()) << type;
  }
}

}  // namespace
}  // namespace cgdp
