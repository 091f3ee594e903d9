// Byte-balanced shard ranges and the per-chunk pieces they cut the flat gradient vector into.
#include "cgdp/shard/shard_layout.hpp"

#include <algorithm>

#include "cgdp/core/error.hpp"

namespace cgdp {
namespace {

constexpr int64_t kAlign = 16;  // elements: 64 bytes
constexpr int kMaxShards = 4096;

void check_plan(std::span<const int64_t> chunk_sizes, int num_shards, PieceLimits limits,
                std::span<const int> owners) {
  if (num_shards < 1 || num_shards > kMaxShards)
    throw UsageError(cat("number of shards must be in [1, ", kMaxShards, "], got ", num_shards));
  if (limits.max_piece < 1 || limits.min_split < 1)
    throw UsageError(cat("shard layout: piece limits must be >= 1, got max_piece ",
                         limits.max_piece, " and min_split ", limits.min_split));
  if (chunk_sizes.empty()) throw UsageError("shard layout: the chunk plan has no chunks");
  for (size_t c = 0; c < chunk_sizes.size(); ++c)
    if (chunk_sizes[c] <= 0)
      throw UsageError(cat("shard layout: chunk ", c, " has ", chunk_sizes[c],
                           " elements; expected at least 1"));
  if (!owners.empty() && owners.size() != chunk_sizes.size())
    throw UsageError(
        cat("shard layout: ", owners.size(), " chunk owners for ", chunk_sizes.size(), " chunks"));
  for (size_t c = 0; c < owners.size(); ++c)
    if (owners[c] < kSummed)
      throw UsageError(cat("shard layout: chunk ", c, " has owner ", owners[c],
                           "; expected a host rank or kSummed"));
}

// Where shard s begins: the ideal cut, or the nearer end of the chunk it would split too thinly.
// `starts` are the chunks' first elements and the total at the end.
int64_t cut(const std::vector<int64_t>& starts, int s, int num_shards, int64_t min_split) {
  const int64_t total = starts.back();
  // floor(total * s / num_shards) without overflow, aligned down.
  const int64_t ideal =
      (total / num_shards * s + total % num_shards * s / num_shards) / kAlign * kAlign;
  const auto after = std::upper_bound(starts.begin(), starts.end(), ideal);
  const int64_t begin = *(after - 1), end = *after;  // the chunk holding `ideal`
  if (ideal == begin || (ideal - begin >= min_split && end - ideal >= min_split)) return ideal;
  return ideal - begin <= end - ideal ? begin : end;
}

}  // namespace

std::span<const ShardPiece> ShardLayout::pieces_of_chunk(int chunk) const {
  return std::span(pieces).subspan(chunk_first[chunk], chunk_first[chunk + 1] - chunk_first[chunk]);
}

std::span<const ShardPiece> ShardLayout::pieces_of_shard(int shard) const {
  const auto first = std::find_if(pieces.begin(), pieces.end(),
                                  [&](const ShardPiece& p) { return p.shard >= shard; });
  const auto last =
      std::find_if(first, pieces.end(), [&](const ShardPiece& p) { return p.shard > shard; });
  return std::span(first, last);
}

uint64_t ShardLayout::fingerprint() const {
  // FNV-1a over the shard count, the limits and the chunk sizes.
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](uint64_t v) {
    for (int b = 0; b < 8; ++b) {
      h ^= (v >> (8 * b)) & 0xff;
      h *= 1099511628211ull;
    }
  };
  mix(static_cast<uint64_t>(num_shards));
  mix(static_cast<uint64_t>(limits.max_piece));
  mix(static_cast<uint64_t>(limits.min_split));
  for (int64_t s : chunk_sizes) mix(static_cast<uint64_t>(s));
  // Only gathered chunks change the hash: a plan of summed chunks keeps the fingerprint it had.
  for (size_t c = 0; c < chunk_owners.size(); ++c)
    if (chunk_owners[c] != kSummed) {
      mix(c);
      mix(static_cast<uint64_t>(chunk_owners[c]));
    }
  return h;
}

ShardLayout assign_ranges(std::span<const int64_t> chunk_sizes, int num_shards, PieceLimits limits,
                          std::span<const int> owners) {
  check_plan(chunk_sizes, num_shards, limits, owners);
  ShardLayout layout;
  layout.num_shards = num_shards;
  layout.limits = limits;
  layout.chunk_sizes.assign(chunk_sizes.begin(), chunk_sizes.end());
  layout.chunk_owners.assign(owners.begin(), owners.end());
  if (owners.empty()) layout.chunk_owners.assign(chunk_sizes.size(), kSummed);
  std::vector<int64_t> starts = {0};
  for (int64_t s : chunk_sizes) starts.push_back(starts.back() + s);
  layout.total = starts.back();
  for (int s = 0; s < num_shards; ++s)
    layout.shard_begin.push_back(cut(starts, s, num_shards, limits.min_split));
  layout.shard_begin.push_back(layout.total);
  int shard = 0;
  for (int c = 0; c < layout.num_chunks(); ++c) {
    layout.chunk_first.push_back(static_cast<int>(layout.pieces.size()));
    for (int64_t at = starts[c]; at < starts[c + 1];) {
      while (layout.shard_begin[shard + 1] <= at) ++shard;
      const int64_t stop =
          std::min({starts[c + 1], layout.shard_begin[shard + 1], at + limits.max_piece});
      layout.pieces.push_back({static_cast<int>(layout.pieces.size()), c, shard, at, stop - at,
                               at - starts[c], layout.chunk_owners[c]});
      at = stop;
    }
  }
  layout.chunk_first.push_back(static_cast<int>(layout.pieces.size()));
  return layout;
}

}  // namespace cgdp
