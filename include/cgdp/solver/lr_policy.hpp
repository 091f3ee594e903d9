// Learning-rate schedules with Caffe's names and formulas (fixed, step, exp, inv, multistep, poly,
// sigmoid).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cgdp.pb.h"

namespace cgdp {

enum class LrSchedule { kFixed, kStep, kExp, kInv, kMultiStep, kPoly, kSigmoid };

// A validated schedule; build it with make_lr_policy() rather than by hand.
struct LrPolicy {
  LrSchedule schedule = LrSchedule::kFixed;
  double base_lr = 0.0;
  double gamma = 1.0;               // step, exp, inv, multistep, sigmoid
  int64_t stepsize = 0;             // step, sigmoid
  std::vector<int64_t> stepvalues;  // multistep, strictly increasing
  int64_t max_iter = 0;             // poly
  double power = 1.0;               // inv, poly
};

// Validates the schedule fields of `solver`; throws UsageError naming `source` and the field.
LrPolicy make_lr_policy(const proto::SolverParameter& solver, const std::string& source = "solver");

// The rate at (0-based) iteration `iter`:
//   fixed      base_lr
//   step       base_lr * gamma^floor(iter / stepsize)
//   exp        base_lr * gamma^iter
//   inv        base_lr * (1 + gamma * iter)^(-power)
//   multistep  base_lr * gamma^(number of stepvalues <= iter)
//   poly       base_lr * max(0, 1 - iter / max_iter)^power
//   sigmoid    base_lr / (1 + exp(-gamma * (iter - stepsize)))
double learning_rate(const LrPolicy& policy, int64_t iter);

}  // namespace cgdp
