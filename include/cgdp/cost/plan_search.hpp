// The best chunk plan for the simulated cost: an exact dynamic programme over every grouping of
// the param layers into runs of consecutive layers (2^(L-1) plans), next to the CGDP paper's
// equal-size plans (sec. 4.2).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cgdp/cost/cost_inputs.hpp"
#include "cgdp/sync/chunk_plan.hpp"

namespace cgdp {

struct PlanChoice {
  ChunkPlan plan;
  // A --chunk value that gives this plan: "layer", "all" or "b1,b2,..."; K for an equal-size plan.
  std::string spec;
  double exchange_end_us = 0;  // backward start to the last chunk landed (and backward done)
  double iteration_us = 0;     // simulate_cgdp's iteration time
};

struct PlanSearchResult {
  PlanChoice best;                     // minimal iteration time over all plans
  PlanChoice best_equal_size;          // the best of equal_size_plan for K = 1..L
  std::vector<PlanChoice> equal_size;  // K = 1..L, in order (empty for a net without params)
  int64_t states_explored = 0;         // DP states kept (for the record)
  // false when, with sum lanes, a front outgrew kMaxFrontStates and was cut to its most
  // promising states: `best` is then the best plan found, not necessarily the optimum.
  bool exact = true;
};

// With sum lanes (one finish time each), the most pipeline states the search keeps per number of
// layers covered; one lane keeps every state.
inline constexpr size_t kMaxFrontStates = 512;

// Exact: keeps, per number of layers covered, the Pareto front of pipeline states (per-stage
// finish times, one per lane of the sum stage with --sum-lanes), which is sound because every
// stage's finish time is non-decreasing in those of the previous chunk. Ties go to the plan with
// fewer chunks. With sum lanes a front can grow large; past kMaxFrontStates it keeps the states
// with the lowest lower bound (result.exact = false).
PlanSearchResult best_plan(const CostInputs& in);

// The --chunk value that reproduces `plan` over `num_layers` param layers.
std::string plan_spec(const ChunkPlan& plan, int num_layers);

// Backward start to exchange end of `plan` by the chunk pipeline alone (what the search
// minimises); equals simulate_cgdp's backward + exchange_after_backward.
double exchange_end_us(const CostInputs& in, const ChunkPlan& plan);

}  // namespace cgdp
