// Learning-rate schedules give Caffe's values; bad solver settings name the field.
#include "cgdp/solver/lr_policy.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "cgdp/core/error.hpp"
#include "support/solver_text.hpp"

namespace cgdp {
namespace {

using testing::solver_from_text;

double rate(const std::string& text, int64_t iter) {
  return learning_rate(make_lr_policy(solver_from_text(text)), iter);
}

TEST(LrPolicy, FixedIsBaseLrAtEveryIteration) {
  for (int64_t iter : {0, 1, 1000, 1000000}) EXPECT_DOUBLE_EQ(rate("base_lr: 0.01", iter), 0.01f);
}

TEST(LrPolicy, StepMultipliesByGammaEveryStepsize) {
  const std::string s = "base_lr: 0.5 lr_policy: 'step' gamma: 0.5 stepsize: 3";
  EXPECT_DOUBLE_EQ(rate(s, 0), 0.5);
  EXPECT_DOUBLE_EQ(rate(s, 2), 0.5);
  EXPECT_DOUBLE_EQ(rate(s, 3), 0.25);
  EXPECT_DOUBLE_EQ(rate(s, 5), 0.25);
  EXPECT_DOUBLE_EQ(rate(s, 6), 0.125);
  EXPECT_DOUBLE_EQ(rate(s, 10), 0.0625);
}

TEST(LrPolicy, MultistepMultipliesByGammaAtEachStepvalue) {
  const std::string s = "base_lr: 1 lr_policy: 'multistep' gamma: 0.25 stepvalue: 2 stepvalue: 5";
  EXPECT_DOUBLE_EQ(rate(s, 0), 1.0);
  EXPECT_DOUBLE_EQ(rate(s, 1), 1.0);
  EXPECT_DOUBLE_EQ(rate(s, 2), 0.25);
  EXPECT_DOUBLE_EQ(rate(s, 4), 0.25);
  EXPECT_DOUBLE_EQ(rate(s, 5), 0.0625);
  EXPECT_DOUBLE_EQ(rate(s, 1000), 0.0625);
}

TEST(LrPolicy, ExpMultipliesByGammaEveryIteration) {
  const std::string s = "base_lr: 2 lr_policy: 'exp' gamma: 0.5";
  EXPECT_DOUBLE_EQ(rate(s, 0), 2.0);
  EXPECT_DOUBLE_EQ(rate(s, 1), 1.0);
  EXPECT_DOUBLE_EQ(rate(s, 4), 0.125);
}

// LeNet's published schedule: base_lr 0.01, inv with gamma 1e-4 and power 0.75.
TEST(LrPolicy, InvIsLeNetsSchedule) {
  const std::string s = "base_lr: 0.01 lr_policy: 'inv' gamma: 0.0001 power: 0.75";
  EXPECT_NEAR(rate(s, 0), 0.01, 1e-9);
  // gamma and power are floats in the solver file: the reference rounds them the same way.
  const double gamma = 0.0001f, power = 0.75f, base = 0.01f;
  EXPECT_DOUBLE_EQ(rate(s, 5000), base * std::pow(1 + gamma * 5000, -power));
  EXPECT_NEAR(rate(s, 10000), 0.01 * std::pow(2.0, -0.75), 1e-9);  // halfway in 1 + gamma * iter
}

TEST(LrPolicy, SigmoidIsHalfTheBaseAtStepsize) {
  const std::string s = "base_lr: 1 lr_policy: 'sigmoid' gamma: -0.5 stepsize: 10";
  EXPECT_DOUBLE_EQ(rate(s, 10), 0.5);
  EXPECT_DOUBLE_EQ(rate(s, 12), 1.0 / (1.0 + std::exp(-(-0.5f) * 2.0)));
  EXPECT_GT(rate(s, 0), 0.99);  // decays from about base_lr
  EXPECT_LT(rate(s, 40), 1e-6);
}

TEST(LrPolicy, PolyDecaysToZeroAtMaxIter) {
  const std::string s = "base_lr: 0.5 lr_policy: 'poly' power: 2 max_iter: 10";
  EXPECT_DOUBLE_EQ(rate(s, 0), 0.5);
  EXPECT_DOUBLE_EQ(rate(s, 5), 0.5 * 0.25);
  EXPECT_NEAR(rate(s, 9), 0.5 * 0.01, 1e-15);
  EXPECT_DOUBLE_EQ(rate(s, 10), 0.0);
  EXPECT_DOUBLE_EQ(rate(s, 15), 0.0);  // past max_iter: 0, not NaN or negative
  const std::string root = "base_lr: 0.5 lr_policy: 'poly' power: 0.5 max_iter: 10";
  EXPECT_NEAR(rate(root, 6), 0.5 * std::sqrt(0.4), 1e-15);
}

// Expects make_lr_policy to throw UsageError whose message contains every part of `needles`.
void expect_usage_error(const std::string& text, std::initializer_list<const char*> needles) {
  try {
    make_lr_policy(solver_from_text(text), "lenet_solver.prototxt");
    ADD_FAILURE() << "no error for: " << text;
  } catch (const UsageError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("lenet_solver.prototxt"), std::string::npos) << message;
    for (const char* needle : needles)
      EXPECT_NE(message.find(needle), std::string::npos)
          << "'" << needle << "' not in: " << message;
  }
}

TEST(LrPolicy, BadSettingsNameTheField) {
  expect_usage_error("lr_policy: 'fixed'", {"base_lr"});
  expect_usage_error("base_lr: -1", {"base_lr", "-1"});
  expect_usage_error("base_lr: 0.1 lr_policy: 'step' gamma: 0.1", {"\"step\"", "stepsize"});
  expect_usage_error("base_lr: 0.1 lr_policy: 'step' stepsize: 10", {"\"step\"", "gamma"});
  expect_usage_error("base_lr: 0.1 lr_policy: 'multistep' gamma: 0.1", {"stepvalue"});
  expect_usage_error(
      "base_lr: 0.1 lr_policy: 'multistep' gamma: 0.1 stepvalue: 10 stepvalue: 20 stepvalue: 20",
      {"stepvalue", "strictly increasing", "20 follows 20"});
  expect_usage_error("base_lr: 0.1 lr_policy: 'poly' power: 1", {"\"poly\"", "max_iter"});
  expect_usage_error("base_lr: 0.1 lr_policy: 'poly' max_iter: 100", {"\"poly\"", "power"});
  expect_usage_error("base_lr: 0.1 lr_policy: 'exp'", {"\"exp\"", "gamma"});
  expect_usage_error("base_lr: 0.1 lr_policy: 'inv' gamma: 0.1", {"\"inv\"", "power"});
  expect_usage_error("base_lr: 0.1 lr_policy: 'sigmoid' gamma: -0.1", {"\"sigmoid\"", "stepsize"});
  expect_usage_error("base_lr: 0.1 lr_policy: 'sigmoid' stepsize: 5 gamma: 0", {"\"sigmoid\"", "gamma != 0"});
  expect_usage_error("base_lr: 0.1 lr_policy: 'cosine'",
                     {"unknown lr_policy \"cosine\"", "fixed, step, exp, inv, multistep, poly, sigmoid"});
}

}  // namespace
}  // namespace cgdp
