// What cgdp exchanges for a chunk plan: the host aggregator's chunks (each a plan chunk less the
// weights that travel as sufficient factors), and across hosts what goes through the shards: the
// chunks' summed elements, which every host pushes and the shards sum, and each host's block of
// factor rows, which only that host pushes and the shards pass on to the others (a gather).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "cgdp/sync/chunk_plan.hpp"
#include "cgdp/sync/factor_block.hpp"
#include "cgdp/sync/host_aggregator.hpp"

namespace cgdp {

// The aggregator's chunks for `plan`: each chunk's parts leave its factored weights out (a weight
// comes first in its layer's range), and a chunk with nothing left is not exchanged.
std::vector<ChunkSpan> exchanged_spans(const ChunkPlan& plan, std::span<const ParamLayer> params,
                                       const std::vector<bool>& factored);

// The shards' chunk plan, in the reducer's numbering: chunk c of `spans` is c (its summed
// elements, kSummed), and host h's block of factor slot s is factor_chunk(spans.size(), s, hosts,
// h) (owner h).
struct ReducedChunks {
  std::vector<int64_t> sizes;  // floats
  std::vector<int> owners;
};
ReducedChunks reduced_chunks(std::span<const ChunkSpan> spans, std::span<const FactorBlock> blocks,
                             int hosts);
inline int factor_chunk(int num_spans, int slot, int hosts, int host) {
  return num_spans + slot * hosts + host;
}

}  // namespace cgdp
