// Dense or factors per InnerProduct: the bytes of each, Poseidon's byte rule, and the choice by
// simulating the iteration both ways.
#include "cgdp/cost/fc_exchange.hpp"

#include <algorithm>
#include <numeric>

#include "cgdp/core/error.hpp"
#include "cgdp/cost/simulator.hpp"

namespace cgdp {

FcExchange parse_fc_exchange(const std::string& text) {
  if (text == "auto") return FcExchange::Auto;
  if (text == "dense") return FcExchange::Dense;
  if (text == "factors") return FcExchange::Factors;
  throw UsageError(cat("--fc-exchange '", text, "': expected auto, dense or factors"));
}

const char* to_string(FcExchange mode) {
  switch (mode) {
    case FcExchange::Auto:
      return "auto";
    case FcExchange::Dense:
      return "dense";
    case FcExchange::Factors:
      return "factors";
  }
  return "?";
}

int64_t factor_elements(const ParamLayer& p, int64_t samples) {
  return p.factors.elements() * samples;
}

LinkBytes layer_bytes(const ParamLayer& p, bool factored, int64_t samples, int workers,
                      int element_bytes) {
  if (!factored) return {p.count * element_bytes, p.count * element_bytes};
  const int64_t rest = (p.count - p.weight_count()) * element_bytes;
  const int64_t factors = factor_elements(p, samples) * element_bytes;
  return {rest + factors, rest + workers * factors};
}

bool factors_move_fewer_bytes(const ParamLayer& p, int64_t samples, int workers) {
  if (!p.factorable()) return false;
  const LinkBytes dense = layer_bytes(p, false, samples, workers);
  const LinkBytes factors = layer_bytes(p, true, samples, workers);
  return factors.d2h + factors.h2d < dense.d2h + dense.h2d;
}

std::vector<bool> factored_by_bytes(std::span<const ParamLayer> params, FcExchange mode,
                                    int64_t samples, int workers) {
  std::vector<bool> factored(params.size(), false);
  for (size_t i = 0; i < params.size(); ++i)
    factored[i] = mode == FcExchange::Factors ? params[i].factorable()
                  : mode == FcExchange::Auto ? factors_move_fewer_bytes(params[i], samples, workers)
                                             : false;
  return factored;
}

std::vector<bool> factored_without_model(std::span<const ParamLayer> params, FcExchange mode,
                                         DeviceKind kind, int64_t samples, int workers) {
  if (kind == DeviceKind::Cpu && mode == FcExchange::Auto)
    return std::vector<bool>(params.size(), false);
  return factored_by_bytes(params, mode, samples, workers);
}

double local_weight_gemm_us(const ParamCost& p) {
  return p.own_backward_us / 2;
}

double rebuild_us(const CostInputs& in, const ParamCost& p) {
  return in.devices * in.hosts * local_weight_gemm_us(p) / in.rebuild_speedup;
}

void apply_factors(CostInputs& in, const std::vector<bool>& factored) {
  CGDP_ASSERT(factored.size() == in.params.size());
  for (size_t i = 0; i < factored.size(); ++i) {
    ParamCost& p = in.params[i];
    CGDP_ASSERT(!factored[i] || p.layer.factorable());
    if (p.factored == factored[i]) continue;
    const double gemm = local_weight_gemm_us(p);
    p.backward_us += factored[i] ? -gemm : gemm;
    p.factored = factored[i];
  }
}

std::vector<bool> choose_factored(const CostInputs& in, const ChunkPlan& plan, FcExchange mode) {
  std::vector<bool> chosen(in.params.size(), false);
  if (!in.exchanges() || mode == FcExchange::Dense) return chosen;
  for (size_t i = 0; i < chosen.size(); ++i) chosen[i] = in.params[i].layer.factorable();
  if (mode == FcExchange::Factors) return chosen;
  std::vector<size_t> order;
  for (size_t i = 0; i < chosen.size(); ++i)
    if (chosen[i]) order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return in.params[a].layer.weight_count() > in.params[b].layer.weight_count();
  });
  const auto iteration_us = [&](const std::vector<bool>& factored) {
    CostInputs trial = in;
    apply_factors(trial, factored);
    return simulate_cgdp(trial, plan).iteration_us;
  };
  std::fill(chosen.begin(), chosen.end(), false);
  double best = iteration_us(chosen);
  for (const size_t i : order) {
    chosen[i] = true;
    const double with = iteration_us(chosen);
    if (with < best)
      best = with;
    else
      chosen[i] = false;
  }
  return chosen;
}

LinkBytes exchange_bytes(const CostInputs& in) {
  LinkBytes total;
  if (!in.exchanges()) return total;
  for (const ParamCost& p : in.params) {
    const LinkBytes b =
        layer_bytes(p.layer, p.factored, in.batch, in.devices * in.hosts, in.element_bytes);
    total.d2h += b.d2h;
    total.h2d += b.h2d;
  }
  return total;
}

std::string describe_factored(std::span<const ParamLayer> params,
                              const std::vector<bool>& factored) {
  std::string names;
  for (size_t i = 0; i < params.size(); ++i)
    if (factored[i]) names += cat(names.empty() ? "" : ", ", params[i].name);
  return cat(names.empty() ? std::string("none") : names, " as factors");
}

}  // namespace cgdp
