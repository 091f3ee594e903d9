// A set of candidate chunk plans for the chunk search (--chunk auto) and the offline tuner: named
// by words and --chunk values, deduplicated, ordered from fine (many chunks) to coarse, each with
// the simulator's prediction when a profile is at hand.
#pragma once

#include <cmath>
#include <span>
#include <string>
#include <vector>

#include "cgdp/cost/cost_inputs.hpp"
#include "cgdp/sync/chunk_plan.hpp"

namespace cgdp {

struct PlanCandidate {
  std::string spec;  // a --chunk value that gives the plan
  ChunkPlan plan;
  double predicted_ms = NAN;    // simulate_cgdp's iteration time; NaN without a profile
  bool predicted_best = false;  // cost-model's best plan over every grouping (the word 'best')
  int chunks() const { return static_cast<int>(plan.chunks.size()); }
};

// The plan set --chunk auto searches when none is given: the paper's equal-size plans, the
// predicted best plan, and the classic single chunk.
inline const std::vector<std::string> kDefaultPlanSet = {"equal", "best", "all"};

// `items`, each one of:
//   equal      the CGDP paper's equal-size plans, K = 1..L (sec. 4.2);
//   equal:A-B  the same for K = A..B;
//   best       the cost model's best plan over every contiguous grouping (needs `inputs`);
//   a --chunk value: layer, all, K, bytes:MB, b1,b2,...
// A plan named twice is kept once, under its first name. With `inputs`, every candidate gets its
// predicted time. Throws UsageError naming `flag` and the item.
std::vector<PlanCandidate> make_plan_set(std::span<const ParamLayer> layers,
                                         std::span<const std::string> items,
                                         const CostInputs* inputs, const std::string& flag);

// Where a search starts: the cost model's best plan when in the set, else the candidate with the
// lowest predicted time (the first one without predictions).
int predicted_best_index(std::span<const PlanCandidate> candidates);

// Layers per chunk on average: the x axis of the paper's Figure 2 (chunk size).
double mean_chunk_size(const PlanCandidate& candidate, int num_layers);

}  // namespace cgdp
