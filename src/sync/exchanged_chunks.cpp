// The aggregator's chunks for a plan, and the shards' plan of summed chunks and gathered blocks.
#include "cgdp/sync/exchanged_chunks.hpp"

#include "cgdp/core/error.hpp"
#include "cgdp/shard/shard_layout.hpp"

namespace cgdp {

namespace {

void add_part(ChunkSpan& span, ElementRange part) {
  if (part.count == 0) return;
  if (!span.parts.empty() && span.parts.back().offset + span.parts.back().count == part.offset)
    span.parts.back().count += part.count;
  else
    span.parts.push_back(part);
}

}  // namespace

std::vector<ChunkSpan> exchanged_spans(const ChunkPlan& plan, std::span<const ParamLayer> params,
                                       const std::vector<bool>& factored) {
  CGDP_ASSERT(factored.empty() || factored.size() == params.size());
  std::vector<ChunkSpan> spans;
  for (const Chunk& chunk : plan.chunks) {
    ChunkSpan span{chunk.offset, chunk.count, {}};
    for (int i = chunk.first; i <= chunk.last; ++i) {
      const ParamLayer& p = params[i];
      const int64_t skip = !factored.empty() && factored[i] ? p.weight_count() : 0;
      add_part(span, {p.offset + skip, p.count - skip});
    }
    if (!span.parts.empty()) spans.push_back(std::move(span));
  }
  return spans;
}

ReducedChunks reduced_chunks(std::span<const ChunkSpan> spans, std::span<const FactorBlock> blocks,
                             int hosts) {
  ReducedChunks r;
  for (const ChunkSpan& span : spans) {
    r.sizes.push_back(span.summed_count());
    r.owners.push_back(kSummed);
  }
  for (const FactorBlock& block : blocks)
    for (int h = 0; h < hosts; ++h) {
      r.sizes.push_back(block.floats());
      r.owners.push_back(h);
    }
  return r;
}

}  // namespace cgdp
