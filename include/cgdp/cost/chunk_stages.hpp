// The stages a cgdp chunk passes through once the compute stream has made it ready, in order:
// each worker's D2H copy, the host sum of the N copies, with several hosts the network exchange
// (network_stage.hpp), each worker's H2D copy. Both the event simulator and the plan search build
// on this list, so a new stage is added here once.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cgdp/cost/cost_inputs.hpp"

namespace cgdp {

// Copies of one direction share a pool of bandwidth (CostInputs::host_memory_gbps).
enum class Pool { None = -1, ToHost = 0, FromHost = 1 };

// Where a stage runs: each worker's D2H or H2D stream, the aggregator's lanes, or the network link.
enum class Queue { D2H = 0, Host = 1, Network = 2, H2D = 3 };
inline constexpr int kQueues = 4;

struct StageCost {
  std::string name;  // "d2h", "sum", "network", "h2d"; a factored weight's "gather", "rebuild"
  // true: each worker does it on its own stream (a copy), after its own previous stage or, after
  // a host stage, after that; false: one host thread does it once all workers' previous stage has
  // finished.
  bool per_worker = true;
  double fixed_us = 0;  // latency of a copy, or the whole time of a host stage
  int64_t bytes = 0;    // moved at up to cap_gbps, sharing `pool` with the copies running then
  double cap_gbps = 0;
  Pool pool = Pool::None;
  int busy_cores = 0;  // cores it keeps busy while it runs, over all workers (CPU backend)
  int lanes = 1;       // a host stage: chunks it runs at once (the sum's lanes), first come first
  Queue queue = Queue::D2H;
};

// The stages of the chunk of `bytes` (per worker) at `offset_bytes` in the flat gradient, in
// pipeline order; the same list for any chunk of `in`. The network stage, present when
// in.hosts > 1, is a host stage: one link that the chunks queue on in order (the busiest host's,
// whose exchange every host's pull waits for; a chunk's busiest host may differ from the previous
// chunk's, which this treats as the same link: a little pessimistic across shard boundaries).
// `fp32_bytes`: the chunk's summed gradients as fp32; the copies and the sum move them in
// in.element_bytes per element.
std::vector<StageCost> chunk_stages(const CostInputs& in, int64_t offset_bytes,
                                    int64_t fp32_bytes);

// The pieces a chunk of `fp32_bytes` travels in: its wire bytes over in.piece_bytes, rounded up
// (1 without pieces). The model takes them alike, `fp32_bytes / pieces` each, every piece through
// every stage in turn, and one sum lane for all pieces of a chunk.
int chunk_pieces(const CostInputs& in, int64_t fp32_bytes);

// The stages of param layer p's weight sent as sufficient factors (fc_exchange.hpp), once its
// backward is done: its factors to the host, the aggregator's hand-off (nothing is summed), every
// worker's rows back to each worker, and its rebuild GEMM on each worker's H2D stream.
std::vector<StageCost> factor_stages(const CostInputs& in, const ParamCost& p);

// `stages` as they run while the layers compute beside them (every chunk but the last):
// in.exchange_stretch times longer (latencies and host stages longer, copy rates lower).
std::vector<StageCost> beside_layers(const CostInputs& in, std::vector<StageCost> stages);

// The compute time a chunk's exchange takes from the workers when they share in.shared_cores
// with it (the CPU backend): its stages' work in core-microseconds (a copy keeps one core busy
// per worker, the host sum its threads) over the cores. The work is conserved: with every core
// busy computing backward, backward ends this much later. 0 without shared cores.
double contention_us(const CostInputs& in, const std::vector<StageCost>& stages);

// The backward time a chunk's exchange of `bytes` per worker takes from the layers computed beside
// it, by bandwidth rather than cores (in.overlap_us_per_mb; the GPU's copies). 0 without.
double overlap_us(const CostInputs& in, int64_t bytes);
// The same for a factored weight: its copies' bytes, and its rebuild GEMM, which computes on the
// device beside the layers (the work is conserved).
double factor_overlap_us(const CostInputs& in, const ParamCost& p);

// A stage's time when the N workers run it together, as cgdp's workers do (same pace, paper
// sec. 3.2): a copy shares its pool N ways.
double stage_us(const CostInputs& in, const StageCost& stage);

}  // namespace cgdp
