// cgdp's chunk stages: D2H copy on each worker, host sum, network exchange between hosts, H2D copy
// on each worker.
#include "cgdp/cost/chunk_stages.hpp"

#include "cgdp/cost/network_stage.hpp"

namespace cgdp {

std::vector<StageCost> chunk_stages(const CostInputs& in, int64_t offset_bytes, int64_t bytes) {
  std::vector<StageCost> stages = {
      {"d2h", true, in.d2h.latency_us, bytes, in.d2h.gbps, Pool::ToHost},
      {"sum", false, host_sum_us(in, bytes), 0, 0, Pool::None},
  };
  if (in.hosts > 1)
    stages.push_back({"network", false, network_us(in, offset_bytes, bytes), 0, 0, Pool::None});
  stages.push_back({"h2d", true, in.h2d.latency_us, bytes, in.h2d.gbps, Pool::FromHost});
  return stages;
}

double stage_us(const CostInputs& in, const StageCost& stage) {
  if (stage.bytes == 0) return stage.fixed_us;
  return copy_us({stage.cap_gbps, stage.fixed_us}, stage.bytes, in.devices,
                 stage.pool == Pool::None ? 0 : in.host_memory_gbps);
}

}  // namespace cgdp
