// Caffe's update rules (SGD, Nesterov, AdaGrad, RMSProp, AdaDelta, Adam) match float64 references
// of Caffe's ComputeUpdateValue; the settings are validated; clipping scales to the norm.
#include "cgdp/solver/update_rule.hpp"

#include <gtest/gtest.h>

#include <algorithm>
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
  const SolverSettings s = make_solver_settings(solver_from_text("momentum: 0.9 weight_decay: 0.0005"));
  EXPECT_FLOAT_EQ(s.momentum, 0.9f);
  EXPECT_FLOAT_EQ(s.weight_decay, 0.0005f);
  try {
    make_solver_settings(solver_from_text("momentum: 1.5"), "s.prototxt");
    ADD_FAILURE() << "momentum 1.5 accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("s.prototxt: momentum must be in [0, 1) (got 1.5)"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(make_solver_settings(solver_from_text("weight_decay: -0.1")), UsageError);
}

// Caffe's ComputeUpdateValue of each solver (sgd_solvers/*.cpp), written step by step in float64:
// Normalize (the scale), Regularize (L2), the rule, then Update (data -= diff).
struct Reference {
  std::vector<double> data, h, h2;
  void step(SolverType type, std::vector<double> diff, double lr, double momentum, double decay,
            double grad_scale, int64_t t, double delta = 1e-8, double momentum2 = 0.999, double rms_decay = 0.99) {
    for (size_t i = 0; i < data.size(); ++i) diff[i] = diff[i] * grad_scale + decay * data[i];
    for (size_t i = 0; i < data.size(); ++i) {
      const double g = diff[i];
      double update = 0;
      switch (type) {
        case SolverType::kSgd:
          h[i] = momentum * h[i] + lr * g;
          update = h[i];
          break;
        case SolverType::kNesterov: {
          const double before = h[i];
          h[i] = momentum * h[i] + lr * g;
          update = (1 + momentum) * h[i] - momentum * before;
          break;
        }
        case SolverType::kAdaGrad:
          h[i] += g * g;
          update = lr * g / (std::sqrt(h[i]) + delta);
          break;
        case SolverType::kRmsProp:
          h[i] = rms_decay * h[i] + (1 - rms_decay) * g * g;
          update = lr * g / (std::sqrt(h[i]) + delta);
          break;
        case SolverType::kAdaDelta: {
          h[i] = momentum * h[i] + (1 - momentum) * g * g;
          const double u = g * std::sqrt((h2[i] + delta) / (h[i] + delta));
          h2[i] = momentum * h2[i] + (1 - momentum) * u * u;
          update = lr * u;
          break;
        }
        case SolverType::kAdam: {
          h[i] = momentum * h[i] + (1 - momentum) * g;
          h2[i] = momentum2 * h2[i] + (1 - momentum2) * g * g;
          const double correction = std::sqrt(1 - std::pow(momentum2, t)) / (1 - std::pow(momentum, t));
          update = lr * correction * h[i] / (std::sqrt(h2[i]) + delta);
          break;
        }
      }
      data[i] -= update;
    }
  }
};

struct RuleCase {
  SolverType type;
  double momentum, lr;
};

class Rules : public ::testing::TestWithParam<RuleCase> {};

// Ten steps of each rule on 40,000 elements (past the parallel threshold), float and float64,
// against the reference; the float64 path agrees to rounding, the float path to float precision.
TEST_P(Rules, TenStepsMatchCaffesUpdateInFloat64) {
  const RuleCase c = GetParam();
  SolverSettings s;
  s.type = c.type;
  s.momentum = c.momentum;
  const size_t n = 40000;
  std::mt19937 rng(11);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<double> data(n), h(n, 0.0), h2(n, 0.0);
  for (double& x : data) x = normal(rng);
  std::vector<float> fdata(data.begin(), data.end()), fh(n, 0.f), fh2(n, 0.f);
  Reference ref{data, h, h2};
  const bool two = s.histories() == 2;
  for (int64_t t = 1; t <= 10; ++t) {
    std::vector<double> diff(n);
    for (double& g : diff) g = normal(rng);
    std::vector<float> fdiff(diff.begin(), diff.end());
    const std::vector<double> ref_diff(fdiff.begin(), fdiff.end());  // both read the float gradient
    const StepScalars k{c.lr, 5e-4, 0.25, t};
    solver_update(s, k, std::span<double>(data), std::span<const double>(ref_diff), std::span<double>(h),
                  two ? std::span<double>(h2) : std::span<double>());
    solver_update(s, k, std::span<float>(fdata), std::span<const float>(fdiff), std::span<float>(fh),
                  two ? std::span<float>(fh2) : std::span<float>());
    ref.step(c.type, ref_diff, c.lr, c.momentum, 5e-4, 0.25, t);
  }
  // float64: to rounding; float: to float's rounding of O(1) values over ten steps.
  double worst64 = 0, worst32 = 0;
  for (size_t i = 0; i < n; ++i) {
    worst64 = std::max(worst64, std::abs(data[i] - ref.data[i]) / (1e-3 + std::abs(ref.data[i])));
    worst32 = std::max(worst32, std::abs(fdata[i] - ref.data[i]) / (1 + std::abs(ref.data[i])));
  }
  EXPECT_LT(worst64, 1e-12) << to_string(c.type);
  EXPECT_LT(worst32, 2e-5) << to_string(c.type);
}

INSTANTIATE_TEST_SUITE_P(AllSolvers, Rules,
                         ::testing::Values(RuleCase{SolverType::kSgd, 0.9, 0.01}, RuleCase{SolverType::kNesterov, 0.95, 0.01},
                                           RuleCase{SolverType::kAdaGrad, 0.0, 0.01}, RuleCase{SolverType::kRmsProp, 0.0, 0.01},
                                           RuleCase{SolverType::kAdaDelta, 0.95, 1.0}, RuleCase{SolverType::kAdam, 0.9, 0.001}),
                         [](const auto& info) { return std::string(to_string(info.param.type)); });

// Adam's first step moves every weight by about lr against its gradient's sign: the bias
// correction at t = 1 makes m / sqrt(v) = g / |g|.
TEST(Rules, AdamsFirstStepIsLrTimesTheSign) {
  SolverSettings s;
  s.type = SolverType::kAdam;
  s.momentum = 0.9;
  std::vector<double> data{1.0, 1.0, 1.0}, diff{0.5, -2.0, 1e-3}, m(3, 0.0), v(3, 0.0);
  solver_update(s, {0.001, 0, 1, 1}, std::span<double>(data), std::span<const double>(diff), std::span<double>(m),
                std::span<double>(v));
  // delta sits beside sqrt(v) = sqrt(1 - beta2) |g|: it shows more on small gradients.
  EXPECT_NEAR(data[0], 1.0 - 0.001, 1e-9);
  EXPECT_NEAR(data[1], 1.0 + 0.001, 1e-9);
  EXPECT_NEAR(data[2], 1.0 - 0.001, 1e-6);
  EXPECT_GT(data[2], data[0]);
}

TEST(Rules, TypesAndTheirSettingsAreReadAndChecked) {
  EXPECT_EQ(make_solver_settings(solver_from_text("type: 'Adam' momentum: 0.9")).type, SolverType::kAdam);
  EXPECT_EQ(make_solver_settings(solver_from_text("solver_type: NESTEROV momentum: 0.9")).type, SolverType::kNesterov);
  EXPECT_EQ(make_solver_settings(solver_from_text("type: 'AdaDelta' momentum: 0.95")).histories(), 2);
  EXPECT_EQ(make_solver_settings(solver_from_text("type: 'RMSProp'")).histories(), 1);
  const auto s = make_solver_settings(solver_from_text("type: 'RMSProp' rms_decay: 0.98 delta: 1e-6"));
  EXPECT_FLOAT_EQ(static_cast<float>(s.rms_decay), 0.98f);
  EXPECT_FLOAT_EQ(static_cast<float>(s.delta), 1e-6f);
  for (const char* bad : {"type: 'AdaGrad' momentum: 0.9", "type: 'Adam' momentum2: 1.0", "type: 'RMSProp' rms_decay: 1",
                          "type: 'Adam' delta: 0", "type: 'Adamax'"})
    EXPECT_THROW(make_solver_settings(solver_from_text(bad), "s.prototxt"), UsageError) << bad;
}

}  // namespace
}  // namespace cgdp
