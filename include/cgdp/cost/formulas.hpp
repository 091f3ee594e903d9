// The CGDP paper's closed-form cost model (sec. 3.2, with chunks as in sec. 4.1): backward time
// T of cgdp and T' of the classic scheme where worker 0 is the server (ps0), and their overheads
// T_O = T - T_BP and T'_O = T' - T_BP. Every exchange step is assumed to overlap perfectly with
// whatever else runs (no queueing on streams or on the aggregator): the event-level simulator
// (simulator.hpp) is the default prediction; these are the paper's analysis, for comparison.
#pragma once

#include <vector>

#include "cgdp/cost/cost_inputs.hpp"
#include "cgdp/sync/chunk_plan.hpp"

namespace cgdp {

// Per chunk c (backward order), the paper's terms, microseconds.
struct ChunkTerms {
  double t_bp = 0;  // backward of the chunk's layers (and the layers above it since the last chunk)
  double t_as = 0;  // its sync point (and what its exchange takes from the layers beside it)
  double t_aa = 0;  // accumulation: D2H copy + host sum
  // With several hosts (not in the paper): the network exchange, network_us (network_stage.hpp),
  // one more step on the chunk's path that, like the others, is assumed to overlap perfectly.
  double t_net = 0;
  double t_bc = 0;   // broadcast of the sum back: H2D copy
  double total = 0;  // T_BP^c = sum over chunks up to c of (t_bp + t_as), + t_aa + t_net + t_bc
};

struct FormulaPrediction {
  double t_bp_us = 0;      // T_BP: the plain backward pass (Def. 3.1)
  double backward_us = 0;  // T (Def. 3.3, at least T_BP + every t_as) or T' (Def. 3.4)
  double overhead_us = 0;  // T_O = T - T_BP or T'_O = T' - T_BP
  // cgdp only: the paper's approximation T_O ~ sum of t_as + t_aa + t_net + t_bc of the last chunk.
  double overhead_approx_us = 0;
  double iteration_us = 0;         // forward + backward_us + update
  std::vector<ChunkTerms> chunks;  // cgdp only
};

FormulaPrediction formula_cgdp(const CostInputs& in, const ChunkPlan& plan);
// T' = T_BP + sum over the tree's levels of (peer copy + device sum) + the same copies back down;
// a level's copies run at once (they share host_memory_gbps as a copy would).
FormulaPrediction formula_ps0(const CostInputs& in);

}  // namespace cgdp
