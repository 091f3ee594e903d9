// What the cost model predicts from: a profile reduced to the param layers of a net and a number
// of workers, with what-if changes applied, and the time of each elementary step (one copy, one
// host sum, one update) under the documented sharing model (docs/profile.md).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cgdp/cost/profile.hpp"
#include "cgdp/sync/chunk_plan.hpp"
#include "cgdp/sync/host_sum.hpp"

namespace cgdp {

// Changes to the measured machine; unset fields keep the profile's values.
struct WhatIf {
  std::optional<double> d2h_gbps;          // > 0
  std::optional<double> h2d_gbps;          // > 0
  std::optional<double> p2p_gbps;          // > 0
  std::optional<double> host_memory_gbps;  // >= 0 (0: copies do not share)
  std::optional<int> shared_cores;         // >= 0 (0: the exchange takes no compute cores)
  std::optional<double> contention_factor;  // >= 0
  std::optional<double> exchange_stretch;   // >= 1
  // Host summing threads: the host sum bandwidth scales by host_threads / profile.host_threads,
  // but never beyond what host memory allows (host_memory_gbps / (N + 1), when set).
  std::optional<int> host_threads;  // >= 1
  // Chunks the aggregator sums at once, each on host_threads / sum_lanes threads (train's
  // --sum-lanes); <= host_threads.
  std::optional<int> sum_lanes;  // >= 1
  // Chunks copied, summed and sent back in pieces of this many KiB of the wire's bytes (train's
  // --chunk-piece-kb); 0: whole chunks. One host only.
  std::optional<int> chunk_piece_kb;  // >= 0
  // Samples per worker: forward and backward times scale by batch / profile.batch.
  std::optional<int> batch;  // >= 1
  // Scale-out (docs/scale-out.md): hosts of N workers each, one shard per host. With hosts > 1 a
  // network bandwidth must come from here or the profile's `network`.
  std::optional<int> hosts;                  // >= 1
  std::optional<double> network_gbps;        // > 0, Gbit/s
  std::optional<double> network_latency_us;  // >= 0, per message
};

// One param layer, backward order.
struct ParamCost {
  ParamLayer layer;  // where its gradients sit (4-byte floats)
  int64_t bytes() const { return layer.count * 4; }
  // Backward time of this layer and of the layers above it down from the previous param layer:
  // the compute stream's work between the two layers' gradients being final (less the weight
  // gradient's GEMM when the weight travels as factors: apply_factors, fc_exchange.hpp).
  double backward_us = 0;
  double own_backward_us = 0;  // this layer's own backward
  // Its weight travels as sufficient factors (fc_exchange.hpp); the rest, the bias, is summed.
  bool factored = false;
  // Bytes summed on the host: all of it, or all but a factored weight.
  int64_t summed_bytes() const { return bytes() - (factored ? layer.weight_count() * 4 : 0); }
};

struct CostInputs {
  int devices = 1;                // N workers
  // One worker on one host trains `local` (no exchange), as `train` does without --sync; false:
  // it runs cgdp's exchange anyway (--sync cgdp, as tools/chunk_tuner and --chunk auto run).
  bool local_when_alone = true;
  bool exchanges() const { return devices > 1 || hosts > 1 || !local_when_alone; }
  double forward_us = 0;          // the whole forward pass of one worker
  std::vector<ParamCost> params;  // backward order, as the flat gradient buffer
  double tail_backward_us = 0;    // backward of the layers below the lowest param layer
  LinkCost d2h, h2d, p2p;
  double host_memory_gbps = 0;  // shared by the copies of one direction at once; 0: unlimited
  // > 0: the workers compute on these cores, which the copies and the host sum also run on (the
  // CPU backend), so the exchange's work slows the backward pass (chunk_stages.hpp).
  int shared_cores = 0;
  double contention_factor = 1;  // scales what the exchange takes from the backward (profile.hpp)
  double exchange_stretch = 1;   // exchange stages beside the layers take this much longer
  int host_threads = 1;                 // threads the host sum runs on
  int sum_lanes = 1;                    // chunks summed at once, host_threads / sum_lanes each
  int lane_threads() const { return sum_lane_threads(host_threads, sum_lanes); }
  int64_t piece_bytes = 0;              // a chunk's pieces on the wire (chunk_stages.hpp); 0: whole
  bool p2p_shares_host_memory = false;  // the CPU backend's peer copies are host memcpys
  double sync_us = 0;                   // per sync point on the compute stream
  double overlap_us_per_mb = 0;         // backward lost per MB of exchange beside it (profile.hpp)
  double host_sum_gbps = 0;             // summing N inputs: bytes of one input per second (1e9)
  double update_gbps = 0;
  double device_sum_gbps = 0;
  int hosts = 1;              // H; > 1 adds the network stage (network_stage.hpp)
  NetworkCost network;        // each host's link; used when hosts > 1
  double shard_sum_gbps = 0;  // a shard sums H inputs: bytes of one input per second (1e9)

  int64_t batch = 1;          // samples per worker
  // Bytes an exchanged element takes on the links and in the host sum (--exchange-dtype: 4 for
  // fp32, 2 for bf16 and fp16); the gradients' own byte counts below stay fp32's.
  int element_bytes = 4;
  int64_t wire_bytes(int64_t fp32_bytes) const { return fp32_bytes / 4 * element_bytes; }
  // The factor rebuild's GEMM speed over fp32's: the profile's rebuild_bf16_speedup with a bf16
  // exchange (set_exchange_dtype), else 1.
  double rebuild_speedup = 1;

  int num_params() const { return static_cast<int>(params.size()); }
  double backward_total_us() const;  // every layer's backward, no sync points
  int64_t param_bytes() const;       // all gradients
  // Bytes the host sums for the chunk of param layers [first, last]: factored weights left out.
  int64_t summed_bytes(int first, int last) const;
};

// Throws DataError naming profile.source when a param layer does not match the profile (see
// check_profile_matches) and UsageError for a what-if value out of range, or for hosts > 1
// without a network bandwidth. `params` as
// param_layers() gives them; devices >= 1. A host sum for N inputs the profile lacks is taken
// from the nearest measured count, its time scaled linearly with the number of inputs.
CostInputs make_cost_inputs(const Profile& profile, std::span<const ParamLayer> params, int devices,
                            const WhatIf& what_if = {});

// Sets what an exchange in `dtype` changes: element_bytes, and rebuild_speedup from the profile.
void set_exchange_dtype(CostInputs& in, const Profile& profile, ExchangeDtype dtype);

// Elementary times, microseconds. `at_once` copies of `bytes` each run together over `link`;
// each moves at min(link.gbps, pool_gbps / at_once) (pool_gbps 0: no sharing).
double copy_us(const LinkCost& link, int64_t bytes, int at_once, double pool_gbps);
// A chunk of `bytes` per worker, as cgdp moves it: all N workers copy at once.
double d2h_us(const CostInputs& in, int64_t bytes);
double h2d_us(const CostInputs& in, int64_t bytes);
// The aggregator sums the N copies of a chunk of `bytes` on one lane: host_sum_gbps scaled to the
// team sum_buffers starts for the chunk (sum_team: one thread per 32 Ki floats, at most
// lane_threads()) out of host_threads.
double host_sum_us(const CostInputs& in, int64_t bytes);
// Threads that sum a chunk of `bytes` (host_sum.hpp's sum_team on one lane).
int host_sum_team(const CostInputs& in, int64_t bytes);
// ps0: one peer copy of `bytes` while `at_once` peer copies run; a parent adds one child.
double p2p_us(const CostInputs& in, int64_t bytes, int at_once);
double device_sum_us(const CostInputs& in, int64_t bytes);
// One solver step over all parameters, on one device.
double update_us(const CostInputs& in);

}  // namespace cgdp
