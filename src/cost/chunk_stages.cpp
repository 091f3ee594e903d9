// cgdp's chunk stages: D2H copy on each worker, host sum, network exchange between hosts, H2D copy
// on each worker.
#include "cgdp/cost/chunk_stages.hpp"

#include <algorithm>

#include "cgdp/cost/fc_exchange.hpp"
#include "cgdp/cost/network_stage.hpp"

namespace cgdp {

std::vector<StageCost> chunk_stages(const CostInputs& in, int64_t offset_bytes,
                                    int64_t fp32_bytes) {
  const int64_t bytes = in.wire_bytes(fp32_bytes);
  // On shared cores a copy is a memcpy on one core per worker; the sum runs on its team.
  const bool shared = in.shared_cores > 0;
  const int copy_cores = shared ? in.devices : 0;
  const int sum_cores = shared ? std::min(host_sum_team(in, bytes), in.shared_cores) : 0;
  std::vector<StageCost> stages = {
      {"d2h", true, in.d2h.latency_us, bytes, in.d2h.gbps, Pool::ToHost, copy_cores, 1,
       Queue::D2H},
      {"sum", false, host_sum_us(in, bytes), 0, 0, Pool::None, sum_cores, in.sum_lanes,
       Queue::Host},
  };
  if (in.hosts > 1)  // the network waits on sockets: no cores to speak of
    stages.push_back({"network", false, network_us(in, offset_bytes, fp32_bytes), 0, 0,
                      Pool::None, 0, 1, Queue::Network});
  stages.push_back({"h2d", true, in.h2d.latency_us, bytes, in.h2d.gbps, Pool::FromHost,
                    copy_cores, 1, Queue::H2D});
  return stages;
}

int chunk_pieces(const CostInputs& in, int64_t fp32_bytes) {
  const int64_t wire = in.wire_bytes(fp32_bytes);
  if (in.piece_bytes <= 0 || wire <= in.piece_bytes) return 1;
  return static_cast<int>((wire + in.piece_bytes - 1) / in.piece_bytes);
}

std::vector<StageCost> factor_stages(const CostInputs& in, const ParamCost& p) {
  const bool shared = in.shared_cores > 0;
  const int copy_cores = shared ? in.devices : 0;
  const int64_t bytes = factor_elements(p.layer, in.batch) * in.element_bytes;
  const int64_t all_workers = static_cast<int64_t>(in.devices) * in.hosts;
  // Across hosts, the H blocks are unpacked side by side: each byte read and written once.
  const double unpack_us =
      in.hosts > 1 && in.host_memory_gbps > 0
          ? 2.0 * static_cast<double>(all_workers * bytes) / (in.host_memory_gbps * 1e3)
          : 0;
  std::vector<StageCost> stages = {
      {"d2h", true, in.d2h.latency_us, bytes, in.d2h.gbps, Pool::ToHost, copy_cores, 1, Queue::D2H},
      {"gather", false, unpack_us, 0, 0, Pool::None, 0, in.sum_lanes, Queue::Host},
  };
  if (in.hosts > 1)
    stages.push_back({"network", false, gather_network_us(in, in.devices * bytes), 0, 0, Pool::None,
                      0, 1, Queue::Network});
  stages.push_back({"h2d", true, in.h2d.latency_us, all_workers * bytes, in.h2d.gbps,
                    Pool::FromHost, copy_cores, 1, Queue::H2D});
  stages.push_back({"rebuild", true, rebuild_us(in, p), 0, 0, Pool::None, 0, 1, Queue::H2D});
  return stages;
}

std::vector<StageCost> beside_layers(const CostInputs& in, std::vector<StageCost> stages) {
  for (StageCost& stage : stages) {
    stage.fixed_us *= in.exchange_stretch;
    stage.cap_gbps /= in.exchange_stretch;
  }
  return stages;
}

double contention_us(const CostInputs& in, const std::vector<StageCost>& stages) {
  if (in.shared_cores <= 0) return 0;
  double core_us = 0;
  for (const StageCost& stage : stages) core_us += stage.busy_cores * stage_us(in, stage);
  return in.contention_factor * core_us / in.shared_cores;
}

double overlap_us(const CostInputs& in, int64_t bytes) {
  return in.overlap_us_per_mb * static_cast<double>(bytes) * 1e-6;
}

double factor_overlap_us(const CostInputs& in, const ParamCost& p) {
  const int64_t bytes = factor_elements(p.layer, in.batch) * in.element_bytes;
  return overlap_us(in, (static_cast<int64_t>(in.devices) * in.hosts + 1) * bytes) +
         rebuild_us(in, p);
}

double stage_us(const CostInputs& in, const StageCost& stage) {
  if (stage.bytes == 0) return stage.fixed_us;
  return copy_us({stage.cap_gbps, stage.fixed_us}, stage.bytes, in.devices,
                 stage.pool == Pool::None ? 0 : in.host_memory_gbps);
}

}  // namespace cgdp
