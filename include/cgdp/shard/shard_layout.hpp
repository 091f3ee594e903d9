// Which parameter-server shard owns which elements of the flat gradient vector: byte-balanced
// ranges cut into per-chunk pieces, the unit that is pushed, summed and pulled.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace cgdp {

// One chunk's elements that live on one shard. Its index in ShardLayout::pieces is the
// protocol's range id.
struct ShardPiece {
  int range = 0;
  int chunk = 0;
  int shard = 0;
  int64_t offset = 0;        // elements, in the flat gradient vector
  int64_t count = 0;         // elements
  int64_t chunk_offset = 0;  // elements from the start of its chunk
};

struct ShardLayout {
  int num_shards = 0;
  int64_t total = 0;                 // elements in the flat vector
  std::vector<int64_t> chunk_sizes;  // the plan it was made from
  std::vector<ShardPiece> pieces;    // by offset; a chunk's pieces are consecutive
  std::vector<int> chunk_first;      // chunk c's pieces: [chunk_first[c], chunk_first[c + 1])
  std::vector<int64_t> shard_begin;  // shard s owns [shard_begin[s], shard_begin[s + 1])

  int num_chunks() const { return static_cast<int>(chunk_sizes.size()); }
  std::span<const ShardPiece> pieces_of_chunk(int chunk) const;
  // The pieces shard s owns (consecutive in `pieces`).
  std::span<const ShardPiece> pieces_of_shard(int shard) const;
  // A hash of the chunk sizes and shard count: hosts and shards check they agree at hello.
  uint64_t fingerprint() const;
};

// Shard s owns elements [cut(s), cut(s + 1)) with cut(s) = total * s / num_shards rounded down to
// 16 elements (64 bytes, so every piece starts cache-line aligned): every shard holds the same
// bytes to within 64, whatever the chunk sizes. A chunk that crosses a cut is split there, so a
// large chunk spreads over several shards and its pieces are summed in parallel.
// Throws UsageError for num_shards < 1, no chunks or a chunk of size <= 0.
ShardLayout assign_ranges(std::span<const int64_t> chunk_sizes, int num_shards);

}  // namespace cgdp
