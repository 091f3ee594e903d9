// Which parameter-server shard owns which elements of the flat gradient vector: byte-balanced
// ranges cut into per-chunk pieces, the unit that is pushed, summed and pulled. A chunk is summed
// (every host pushes it) or gathered (one host pushes it, the shards pass it on to the others).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace cgdp {

// A chunk every host pushes and the shards sum; otherwise the one host that pushes it.
inline constexpr int kSummed = -1;

// Consecutive elements of one chunk on one shard, at most PieceLimits::max_piece of them: the unit
// pushed, summed and pulled. Its index in ShardLayout::pieces is the protocol's range id.
struct ShardPiece {
  int range = 0;
  int chunk = 0;
  int shard = 0;
  int64_t offset = 0;        // elements, in the flat gradient vector
  int64_t count = 0;         // elements
  int64_t chunk_offset = 0;  // elements from the start of its chunk
  int owner = kSummed;       // its chunk's (chunk_owner)
};

// How finely chunks are cut (elements). Every host and shard must use the same.
struct PieceLimits {
  // The cap on a piece, 1 MiB: the shard sums a large chunk's first pieces while later ones are
  // still arriving, and every receive buffer stays in malloc's reused heap (a 64 MiB message
  // would be a fresh mapping, faulted in and zeroed each time).
  int64_t max_piece = int64_t{1} << 18;
  // A chunk is split between two shards only if both sides get at least this, 64 KiB: below it
  // the messages' fixed costs outweigh the balance.
  int64_t min_split = int64_t{1} << 14;
};

struct ShardLayout {
  int num_shards = 0;
  PieceLimits limits;
  int64_t total = 0;                 // elements in the flat vector
  std::vector<int64_t> chunk_sizes;  // the plan it was made from
  std::vector<int> chunk_owners;     // per chunk: kSummed, or the host whose rows it carries
  std::vector<ShardPiece> pieces;    // by offset; a chunk's pieces are consecutive
  std::vector<int> chunk_first;      // chunk c's pieces: [chunk_first[c], chunk_first[c + 1])
  std::vector<int64_t> shard_begin;  // shard s owns [shard_begin[s], shard_begin[s + 1])

  int num_chunks() const { return static_cast<int>(chunk_sizes.size()); }
  std::span<const ShardPiece> pieces_of_chunk(int chunk) const;
  // The pieces shard s owns (consecutive in `pieces`; none when its range is empty).
  std::span<const ShardPiece> pieces_of_shard(int shard) const;
  int chunk_owner(int chunk) const { return chunk_owners[chunk]; }
  // A hash of the chunk sizes and owners, shard count and limits: hosts and shards check they
  // agree.
  uint64_t fingerprint() const;
};

// Shard s owns elements [cut(s), cut(s + 1)). The ideal cut is total * s / num_shards rounded
// down to 16 elements (64 bytes, so pieces start cache-line aligned). A chunk that crosses a cut
// is split there when both sides get at least min_split elements, so a large chunk spreads over
// several shards whose pieces are summed in parallel; otherwise the cut moves to the nearer end
// of that chunk (each shard is then within min_split elements of an equal share). What a chunk
// has on one shard is cut into pieces of at most max_piece elements.
// `owners` (empty: every chunk summed) gives each chunk kSummed or the host that gathers it.
// Throws UsageError for num_shards < 1, no chunks, a chunk of size <= 0, limits < 1, or owners of
// another length or below kSummed.
ShardLayout assign_ranges(std::span<const int64_t> chunk_sizes, int num_shards,
                          PieceLimits limits = {}, std::span<const int> owners = {});

}  // namespace cgdp
