// The default prediction: an event-level simulation of one training iteration (event_sim.hpp)
// with each worker's compute, D2H and H2D streams, the host aggregator and the shared bandwidth
// of docs/profile.md. Times are microseconds.
#pragma once

#include <string>
#include <vector>

#include "cgdp/cost/cost_inputs.hpp"
#include "cgdp/sync/chunk_plan.hpp"

namespace cgdp {

struct StageSpan {
  std::string name;  // as chunk_stages() names them
  double start_us = 0;
  double end_us = 0;
};

// One chunk on worker 0, from the start of the backward pass.
struct ChunkTiming {
  double ready_us = 0;  // its sync point has run on the compute stream
  std::vector<StageSpan> stages;
};

// Phases as the per-phase table (train/phase_table.hpp) measures them.
struct IterationPrediction {
  double forward_us = 0;
  double backward_us = 0;  // the compute stream's backward, sync points included
  // cgdp: until the last summed chunk has landed; ps0: until worker 0 holds the sum.
  double exchange_after_backward_us = 0;
  double update_us = 0;
  double broadcast_us = 0;          // ps0: parameters down the tree after the update; cgdp: 0
  double sum_us = 0;                // time spent summing (host for cgdp, worker 0's device for ps0)
  double iteration_us = 0;          // the sum of the phases above but sum_us
  std::vector<ChunkTiming> chunks;  // cgdp only
};

IterationPrediction simulate_cgdp(const CostInputs& in, const ChunkPlan& plan);
// The classic scheme as src/sync/ps0_sync.cpp runs it: gradients up a binary tree (stride 1, 2,
// 4, ...) with peer copies and device sums, update on worker 0, parameters back down the tree;
// each tree hand-off is one sync point.
IterationPrediction simulate_ps0(const CostInputs& in);

}  // namespace cgdp
