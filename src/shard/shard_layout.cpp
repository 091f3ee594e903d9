// Byte-balanced shard ranges and the per-chunk pieces they cut the flat gradient vector into.
#include "cgdp/shard/shard_layout.hpp"

#include <algorithm>

#include "cgdp/core/error.hpp"

namespace cgdp {
namespace {

constexpr int64_t kAlign = 16;  // elements: 64 bytes
constexpr int kMaxShards = 4096;

void check_plan(std::span<const int64_t> chunk_sizes, int num_shards) {
  if (num_shards < 1 || num_shards > kMaxShards)
    throw UsageError(cat("number of shards must be in [1, ", kMaxShards, "], got ", num_shards));
  if (chunk_sizes.empty()) throw UsageError("shard layout: the chunk plan has no chunks");
  for (size_t c = 0; c < chunk_sizes.size(); ++c)
    if (chunk_sizes[c] <= 0)
      throw UsageError(cat("shard layout: chunk ", c, " has ", chunk_sizes[c],
                           " elements; expected at least 1"));
}

}  // namespace

std::span<const ShardPiece> ShardLayout::pieces_of_chunk(int chunk) const {
  return std::span(pieces).subspan(chunk_first[chunk], chunk_first[chunk + 1] - chunk_first[chunk]);
}

std::span<const ShardPiece> ShardLayout::pieces_of_shard(int shard) const {
  const auto first = std::find_if(pieces.begin(), pieces.end(),
                                  [&](const ShardPiece& p) { return p.shard >= shard; });
  const auto last = std::find_if(first, pieces.end(),
                                 [&](const ShardPiece& p) { return p.shard > shard; });
  return std::span(first, last);
}

uint64_t ShardLayout::fingerprint() const {
  // FNV-1a over the shard count and the chunk sizes.
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](uint64_t v) {
    for (int b = 0; b < 8; ++b) {
      h ^= (v >> (8 * b)) & 0xff;
      h *= 1099511628211ull;
    }
  };
  mix(static_cast<uint64_t>(num_shards));
  for (int64_t s : chunk_sizes) mix(static_cast<uint64_t>(s));
  return h;
}

ShardLayout assign_ranges(std::span<const int64_t> chunk_sizes, int num_shards) {
  check_plan(chunk_sizes, num_shards);
  ShardLayout layout;
  layout.num_shards = num_shards;
  layout.chunk_sizes.assign(chunk_sizes.begin(), chunk_sizes.end());
  for (int64_t s : chunk_sizes) layout.total += s;
  const int64_t total = layout.total;
  for (int s = 0; s < num_shards; ++s) {
    // floor(total * s / num_shards) without overflow, aligned down (cuts may meet, never cross).
    const int64_t cut = total / num_shards * s + total % num_shards * s / num_shards;
    layout.shard_begin.push_back(cut / kAlign * kAlign);
  }
  layout.shard_begin.push_back(total);
  int64_t offset = 0;
  int shard = 0;
  for (int c = 0; c < static_cast<int>(chunk_sizes.size()); ++c) {
    layout.chunk_first.push_back(static_cast<int>(layout.pieces.size()));
    const int64_t end = offset + chunk_sizes[c];
    for (int64_t at = offset; at < end;) {
      while (layout.shard_begin[shard + 1] <= at) ++shard;
      const int64_t stop = std::min(end, layout.shard_begin[shard + 1]);
      layout.pieces.push_back({static_cast<int>(layout.pieces.size()), c, shard, at, stop - at,
                               at - offset});
      at = stop;
    }
    offset = end;
  }
  layout.chunk_first.push_back(static_cast<int>(layout.pieces.size()));
  return layout;
}

}  // namespace cgdp
