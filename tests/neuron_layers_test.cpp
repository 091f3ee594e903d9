// Caffe's elementwise layers (Sigmoid, TanH, AbsVal, BNLL, Power, Exp, Log, ELU, Threshold): forward
// against float64 formulas written out here, backward against finite differences, in place where
// Caffe allows it, and the settings Caffe refuses.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "support/layer_case.hpp"

namespace cgdp {
namespace {

using testing::Case;
using testing::check_gradients;
using testing::error_of;
using testing::expect_in_place_matches;
using testing::keep_away;
using ::testing::HasSubstr;

struct Neuron {
  const char* name;
  std::string text;
  std::function<double(double)> f;  // Caffe's formula, in float64
  double lo = -2, hi = 2;          // inputs drawn here (Log needs shift + scale x > 0)
  double kink = NAN;               // where the function bends: finite differences keep away
};

std::vector<Neuron> neurons() {
  return {
      {"Sigmoid", "type: 'Sigmoid'", [](double x) { return 1 / (1 + std::exp(-x)); }},
      {"TanH", "type: 'TanH'", [](double x) { return std::tanh(x); }},
      {"AbsVal", "type: 'AbsVal'", [](double x) { return std::abs(x); }, -2, 2, 0},
      {"BNLL", "type: 'BNLL'", [](double x) { return std::log1p(std::exp(x)); }},
      {"PowerSquare", "type: 'Power' power_param { power: 2 scale: 0.5 shift: 1 }",
       [](double x) { return std::pow(1 + 0.5 * x, 2); }},
      {"PowerRoot", "type: 'Power' power_param { power: 0.5 scale: 2 shift: 5 }",
       [](double x) { return std::sqrt(5 + 2 * x); }},
      {"ExpNatural", "type: 'Exp'", [](double x) { return std::exp(x); }},
      {"ExpBase2", "type: 'Exp' exp_param { base: 2 scale: 0.5 shift: 1 }",
       [](double x) { return std::pow(2.0, 1 + 0.5 * x); }},
      {"LogNatural", "type: 'Log' log_param { shift: 3 }", [](double x) { return std::log(3 + x); }},
      {"LogBase10", "type: 'Log' log_param { base: 10 scale: 2 shift: 5 }",
       [](double x) { return std::log10(5 + 2 * x); }},
      {"ELU", "type: 'ELU' elu_param { alpha: 0.7 }", [](double x) { return x > 0 ? x : double(0.7f) * (std::exp(x) - 1); },  // alpha is a float in the file
       -2, 2, 0},
      {"Threshold", "type: 'Threshold' threshold_param { threshold: 0.25 }",
       [](double x) { return x > 0.25 ? 1.0 : 0.0; }},
  };
}

std::vector<Neuron> with_gradients() {
  std::vector<Neuron> out;
  for (const Neuron& n : neurons())
    if (std::string(n.name) != "Threshold") out.push_back(n);  // a step: NoGradientThroughAStep
  return out;
}

class NeuronLayers : public ::testing::TestWithParam<Neuron> {};
class NeuronGradients : public ::testing::TestWithParam<Neuron> {};

TEST_P(NeuronLayers, ForwardIsCaffesFormula) {
  const Neuron& n = GetParam();
  Case<double> c(cat("name: 'n' ", n.text), {{3, 4, 5}}, 1);
  testing::fill_uniform(*c.bottom[0], n.lo, n.hi, 3);
  c.setup();
  c.forward();
  for (int64_t i = 0; i < c.bottom[0]->count(); ++i)
    EXPECT_NEAR(c.top[0]->data()[i], n.f(c.bottom[0]->data()[i]), 1e-12 * std::max(1.0, std::abs(n.f(c.bottom[0]->data()[i]))))
        << "x = " << c.bottom[0]->data()[i];
}

TEST_P(NeuronGradients, MatchFiniteDifferences) {
  const Neuron& n = GetParam();
  Case<double> c(cat("name: 'n' ", n.text), {{2, 3, 4}}, 1);
  testing::fill_uniform(*c.bottom[0], n.lo, n.hi, 5);
  if (!std::isnan(n.kink)) keep_away(*c.bottom[0], n.kink, 1e-3);
  c.setup();
  check_gradients(*c.layer, c.bottom, c.top);
}

INSTANTIATE_TEST_SUITE_P(Caffe, NeuronLayers, ::testing::ValuesIn(neurons()),
                         [](const auto& info) { return std::string(info.param.name); });
INSTANTIATE_TEST_SUITE_P(Caffe, NeuronGradients, ::testing::ValuesIn(with_gradients()),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(NeuronLayers, InPlaceWhereTheGradientNeedsOnlyTheOutput) {
  for (const char* text : {"name: 'n' type: 'Sigmoid'", "name: 'n' type: 'TanH'", "name: 'n' type: 'ELU'",
                           "name: 'n' type: 'Exp' exp_param { base: 3 }"})
    expect_in_place_matches(text, {3, 4}, {});
  for (const char* text : {"name: 'n' type: 'AbsVal'", "name: 'n' type: 'BNLL'", "name: 'n' type: 'Power'",
                           "name: 'n' type: 'Log'", "name: 'n' type: 'ELU' elu_param { alpha: -0.5 }"}) {
    Case<double> c(text, {{3, 4}}, 0);
    c.top = {c.bottom[0]};
    EXPECT_THAT(error_of<ModelError>([&] { c.setup(); }), HasSubstr("cannot run in place")) << text;
  }
}

TEST(NeuronLayers, NoGradientThroughAStep) {
  Case<double> c("name: 't' type: 'Threshold'", {{4}}, 1);
  EXPECT_FALSE(c.layer->can_backward_to(0));
}

TEST(NeuronLayers, AnExpOrLogBaseCaffeRefusesIsNamed) {
  EXPECT_THAT(error_of<ModelError>([] { Case<double> c("name: 'e' type: 'Exp' exp_param { base: -2 }", {{2}}, 1); }),
              HasSubstr("layer 'e' (Exp): exp_param.base must be > 0, or -1 for e (got -2)"));
  EXPECT_THAT(error_of<ModelError>([] { Case<double> c("name: 'l' type: 'Log' log_param { base: 0 }", {{2}}, 1); }),
              HasSubstr("layer 'l' (Log): log_param.base must be > 0"));
}

// BNLL stays finite where the naive log(1 + e^x) overflows, and its gradient saturates at 1.
TEST(NeuronLayers, BnllIsStableForLargeInputs) {
  Case<float> c("name: 'b' type: 'BNLL'", {{3}}, 1);
  c.bottom[0]->mutable_data()[0] = 200;
  c.bottom[0]->mutable_data()[1] = -200;
  c.bottom[0]->mutable_data()[2] = 0;
  c.setup();
  c.forward();
  EXPECT_FLOAT_EQ(c.top[0]->data()[0], 200.f);
  EXPECT_NEAR(c.top[0]->data()[1], 0.f, 1e-30);
  EXPECT_FLOAT_EQ(c.top[0]->data()[2], std::log(2.f));
  std::fill_n(c.top[0]->mutable_diff(), 3, 1.f);
  c.layer->backward({}, c.top, {true}, c.bottom);
  EXPECT_FLOAT_EQ(c.bottom[0]->diff()[0], 1.f);
  EXPECT_FLOAT_EQ(c.bottom[0]->diff()[2], 0.5f);
}

}  // namespace
}  // namespace cgdp
