// Learning-rate schedules: validation of the solver fields and Caffe's formulas.
#include "cgdp/solver/lr_policy.hpp"

#include <algorithm>
#include <cmath>

#include "cgdp/core/error.hpp"

namespace cgdp {

namespace {

constexpr const char* kKnownPolicies = "fixed, step, exp, inv, multistep, poly, sigmoid";

LrSchedule parse_schedule(const std::string& name, const std::string& source) {
  if (name == "fixed") return LrSchedule::kFixed;
  if (name == "step") return LrSchedule::kStep;
  if (name == "exp") return LrSchedule::kExp;
  if (name == "inv") return LrSchedule::kInv;
  if (name == "sigmoid") return LrSchedule::kSigmoid;
  if (name == "multistep") return LrSchedule::kMultiStep;
  if (name == "poly") return LrSchedule::kPoly;
  throw UsageError(cat(source, ": unknown lr_policy \"", name, "\" (known: ", kKnownPolicies, ")"));
}

void require(bool ok, const std::string& source, const std::string& policy,
             const std::string& what) {
  if (!ok) throw UsageError(cat(source, ": lr_policy \"", policy, "\" needs ", what));
}

// Caffe leaves gamma and power without defaults; a silent 0 would stop training, so ask for them.
double require_gamma(const proto::SolverParameter& solver, const std::string& source) {
  require(solver.has_gamma() && std::isfinite(solver.gamma()) && solver.gamma() > 0, source,
          solver.lr_policy(),
          cat("gamma > 0 (got ", solver.has_gamma() ? cat(solver.gamma()) : "none", ")"));
  return solver.gamma();
}

std::vector<int64_t> require_stepvalues(const proto::SolverParameter& solver,
                                        const std::string& source) {
  require(solver.stepvalue_size() > 0, source, solver.lr_policy(), "at least one stepvalue");
  std::vector<int64_t> values;
  for (int i = 0; i < solver.stepvalue_size(); ++i) {
    if (i > 0 && solver.stepvalue(i) <= solver.stepvalue(i - 1))
      throw UsageError(cat(source, ": stepvalue must be strictly increasing (stepvalue ",
                           solver.stepvalue(i), " follows ", solver.stepvalue(i - 1), ")"));
    values.push_back(solver.stepvalue(i));
  }
  return values;
}

}  // namespace

LrPolicy make_lr_policy(const proto::SolverParameter& solver, const std::string& source) {
  LrPolicy p;
  const std::string& name = solver.lr_policy();
  p.schedule = parse_schedule(name, source);
  if (!solver.has_base_lr()) throw UsageError(cat(source, ": base_lr is not set"));
  if (!std::isfinite(solver.base_lr()) || solver.base_lr() < 0)
    throw UsageError(
        cat(source, ": base_lr must be a finite number >= 0 (got ", solver.base_lr(), ")"));
  p.base_lr = solver.base_lr();
  switch (p.schedule) {
    case LrSchedule::kFixed:
      break;
    case LrSchedule::kStep:
      require(solver.stepsize() > 0, source, name,
              cat("stepsize > 0 (got ", solver.stepsize(), ")"));
      p.stepsize = solver.stepsize();
      p.gamma = require_gamma(solver, source);
      break;
    case LrSchedule::kExp:
      p.gamma = require_gamma(solver, source);
      break;
    case LrSchedule::kInv:
      p.gamma = require_gamma(solver, source);
      require(solver.has_power() && std::isfinite(solver.power()), source, name,
              cat("power (got ", solver.has_power() ? cat(solver.power()) : "none", ")"));
      p.power = solver.power();
      break;
    case LrSchedule::kSigmoid:  // gamma < 0 decays, > 0 warms up: any finite value but 0
      require(solver.has_gamma() && std::isfinite(solver.gamma()) && solver.gamma() != 0, source, name,
              cat("gamma != 0 (got ", solver.has_gamma() ? cat(solver.gamma()) : "none", ")"));
      p.gamma = solver.gamma();
      require(solver.stepsize() > 0, source, name, cat("stepsize > 0 (got ", solver.stepsize(), ")"));
      p.stepsize = solver.stepsize();
      break;
    case LrSchedule::kMultiStep:
      p.stepvalues = require_stepvalues(solver, source);
      p.gamma = require_gamma(solver, source);
      break;
    case LrSchedule::kPoly:
      require(solver.max_iter() > 0, source, name,
              cat("max_iter > 0 (got ", solver.max_iter(), ")"));
      require(solver.has_power() && std::isfinite(solver.power()) && solver.power() >= 0, source,
              name,
              cat("power >= 0 (got ", solver.has_power() ? cat(solver.power()) : "none", ")"));
      p.max_iter = solver.max_iter();
      p.power = solver.power();
      break;
  }
  return p;
}

double learning_rate(const LrPolicy& p, int64_t iter) {
  CGDP_ASSERT(iter >= 0);
  switch (p.schedule) {
    case LrSchedule::kFixed:
      return p.base_lr;
    case LrSchedule::kStep:
      return p.base_lr * std::pow(p.gamma, static_cast<double>(iter / p.stepsize));
    case LrSchedule::kExp:
      return p.base_lr * std::pow(p.gamma, static_cast<double>(iter));
    case LrSchedule::kInv:
      return p.base_lr * std::pow(1.0 + p.gamma * static_cast<double>(iter), -p.power);
    case LrSchedule::kSigmoid:
      return p.base_lr / (1.0 + std::exp(-p.gamma * static_cast<double>(iter - p.stepsize)));
    case LrSchedule::kMultiStep: {
      // Caffe advances a counter while iter >= stepvalue[counter]; the count is the same.
      const auto passed =
          std::upper_bound(p.stepvalues.begin(), p.stepvalues.end(), iter) - p.stepvalues.begin();
      return p.base_lr * std::pow(p.gamma, static_cast<double>(passed));
    }
    case LrSchedule::kPoly: {
      // Clamped so iterations past max_iter give 0 instead of a negative base (NaN for
      // fractional powers).
      const double left =
          std::max(0.0, 1.0 - static_cast<double>(iter) / static_cast<double>(p.max_iter));
      return p.base_lr * std::pow(left, p.power);
    }
  }
  return p.base_lr;
}

}  // namespace cgdp
