// SGD with momentum and weight decay matches a float64 reference of Caffe's update.
#include "cgdp/solver/sgd.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "cgdp/core/error.hpp"
#include "support/solver_text.hpp"

namespace cgdp {
namespace {

using testing::solver_from_text;

// Caffe's three steps, written separately and in float64.
void reference_update(std::vector<double>& data, std::vector<double> diff,
                      std::vector<double>& history, double lr, double momentum, double decay) {
  for (size_t i = 0; i < data.size(); ++i) diff[i] += decay * data[i];  // Regularize
  for (size_t i = 0; i < data.size(); ++i) history[i] = momentum * history[i] + lr * diff[i];
  for (size_t i = 0; i < data.size(); ++i) data[i] -= history[i];  // Update
}

TEST(Sgd, OneStepIsExactOnRepresentableValues) {
  std::vector<float> data{1.f, -2.f}, diff{0.5f, 0.25f}, history{0.25f, 0.f};
  sgd_update(data, diff, history, /*lr=*/0.5f, /*momentum=*/0.5f, /*decay=*/0.5f);
  // g = 0.5 + 0.5*1 = 1; v = 0.5*0.25 + 0.5*1 = 0.625; w = 1 - 0.625
  EXPECT_EQ(history[0], 0.625f);
  EXPECT_EQ(data[0], 0.375f);
  // g = 0.25 - 1 = -0.75; v = -0.375; w = -2 + 0.375
  EXPECT_EQ(history[1], -0.375f);
  EXPECT_EQ(data[1], -1.625f);
  EXPECT_EQ(diff[0], 0.5f);  // diff is left as it was
  EXPECT_EQ(diff[1], 0.25f);
}

TEST(Sgd, ManyStepsMatchFloat64ReferenceOnLargeArray) {
  const size_t n = 100003;  // above the parallel threshold, with a vector tail
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> data(n), history(n, 0.f), diff(n);
  for (float& x : data) x = normal(rng);
  std::vector<double> ref_data(data.begin(), data.end()), ref_history(n, 0.0);
  const float lrs[] = {0.1f, 0.1f, 0.05f, 0.05f, 0.01f};
  for (float lr : lrs) {
    for (float& g : diff) g = normal(rng);
    const std::vector<double> ref_diff(diff.begin(), diff.end());
    sgd_update(data, diff, history, lr, 0.9f, 5e-4f);
    reference_update(ref_data, ref_diff, ref_history, lr, 0.9f, 5e-4f);
  }
  // |ref - got| <= atol + rtol * |ref|: atol covers float rounding of O(1) terms that cancel.
  const double atol = 1e-6, rtol = 1e-5;
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i) {
    bad += std::abs(data[i] - ref_data[i]) > atol + rtol * std::abs(ref_data[i]);
    bad += std::abs(history[i] - ref_history[i]) > atol + rtol * std::abs(ref_history[i]);
  }
  EXPECT_EQ(bad, 0u);
}

TEST(Sgd, DoubleOverloadMatchesReferenceTightly) {
  std::vector<double> data{0.3, -1.7, 2.2}, diff{0.1, 0.2, -0.3}, history{0.01, -0.02, 0.0};
  std::vector<double> ref_data = data, ref_history = history;
  sgd_update(data, diff, history, 0.07, 0.9, 1e-3);
  reference_update(ref_data, diff, ref_history, 0.07, 0.9, 1e-3);
  for (size_t i = 0; i < data.size(); ++i) {
    EXPECT_NEAR(data[i], ref_data[i], 1e-15 * (1 + std::abs(ref_data[i])));
    EXPECT_NEAR(history[i], ref_history[i], 1e-15 * (1 + std::abs(ref_history[i])));
  }
}

TEST(Sgd, MismatchedSizesAreRejected) {
  std::vector<float> data(4), diff(3), history(4);
  EXPECT_THROW(sgd_update(data, diff, history, 0.1f, 0.9f, 0.f), Error);
}

TEST(Sgd, SettingsAreValidated) {
  const SgdSettings s = make_sgd_settings(solver_from_text("momentum: 0.9 weight_decay: 0.0005"));
  EXPECT_FLOAT_EQ(s.momentum, 0.9f);
  EXPECT_FLOAT_EQ(s.weight_decay, 0.0005f);
  try {
    make_sgd_settings(solver_from_text("momentum: 1.5"), "s.prototxt");
    ADD_FAILURE() << "momentum 1.5 accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("s.prototxt: momentum must be in [0, 1) (got 1.5)"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(make_sgd_settings(solver_from_text("weight_decay: -0.1")), UsageError);
}

}  // namespace
}  // namespace cgdp
