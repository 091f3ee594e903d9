// The CGDP paper's closed forms (sec. 3.2, Definitions 3.1-3.4), chunk by chunk (sec. 4.1).
#include "cgdp/cost/formulas.hpp"

#include <algorithm>

#include "cgdp/cost/chunk_stages.hpp"
#include "cgdp/cost/network_stage.hpp"

namespace cgdp {

FormulaPrediction formula_cgdp(const CostInputs& in, const ChunkPlan& plan) {
  FormulaPrediction f;
  f.t_bp_us = in.backward_total_us();
  double elapsed = 0;  // sum of (t_bp + t_as) up to the current chunk
  for (const Chunk& chunk : plan.chunks) {
    ChunkTerms t;
    for (int i = chunk.first; i <= chunk.last; ++i) t.t_bp += in.params[i].backward_us;
    const int64_t bytes = in.summed_bytes(chunk.first, chunk.last);  // factored weights apart
    const int64_t wire = in.wire_bytes(bytes);
    // The paper's t_as, plus what the exchange takes from the layers beside it (not the last's).
    t.t_as = in.sync_us + (&chunk != &plan.chunks.back() ? overlap_us(in, wire) : 0);
    t.t_aa = d2h_us(in, wire) + host_sum_us(in, wire);
    t.t_net = network_us(in, chunk.offset * 4, bytes);
    t.t_bc = h2d_us(in, wire);
    elapsed += t.t_bp + t.t_as;
    t.total = elapsed + t.t_aa + t.t_net + t.t_bc;
    f.chunks.push_back(t);
  }
  // The layers below the last chunk still run, after every sync point.
  double sync_points = 0;
  for (const ChunkTerms& t : f.chunks) sync_points += t.t_as;
  f.backward_us = f.t_bp_us + sync_points;
  for (const ChunkTerms& t : f.chunks) f.backward_us = std::max(f.backward_us, t.total);
  f.overhead_us = f.backward_us - f.t_bp_us;
  if (!f.chunks.empty())
    f.overhead_approx_us =
        sync_points + f.chunks.back().t_aa + f.chunks.back().t_net + f.chunks.back().t_bc;
  f.iteration_us = in.forward_us + f.backward_us + update_us(in);
  return f;
}

FormulaPrediction formula_ps0(const CostInputs& in) {
  FormulaPrediction f;
  f.t_bp_us = in.backward_total_us();
  const int64_t bytes = in.param_bytes();
  double accumulate = 0, broadcast = 0;
  for (int stride = 1; stride < in.devices; stride *= 2) {
    const int copies = (in.devices - stride + 2 * stride - 1) / (2 * stride);  // this level's edges
    accumulate += p2p_us(in, bytes, copies) + device_sum_us(in, bytes);
    broadcast += p2p_us(in, bytes, copies);
  }
  f.backward_us = f.t_bp_us + accumulate + broadcast;
  f.overhead_us = f.backward_us - f.t_bp_us;
  f.iteration_us = in.forward_us + f.backward_us + update_us(in);
  return f;
}

}  // namespace cgdp
