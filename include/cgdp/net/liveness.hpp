// Placing buffers in one arena by when they are alive: two buffers alive in disjoint stretches of
// an iteration may take the same bytes. Pure: steps and sizes in, offsets out.
#pragma once

#include <cstdint>
#include <vector>

namespace cgdp {

// Steps [first, last], both inclusive, during which a buffer's bytes must stay put.
struct LiveRange {
  int first = 0, last = 0;
};

// Whether bytes [a_offset, a_offset + a_bytes) and [b_offset, b_offset + b_bytes) share one.
inline bool bytes_overlap(int64_t a_offset, int64_t a_bytes, int64_t b_offset, int64_t b_bytes) {
  return a_offset < b_offset + b_bytes && b_offset < a_offset + a_bytes;
}

struct Occupant {
  std::vector<LiveRange> live;  // disjoint stretches; between them the bytes are free
  int64_t bytes = 0;
  int64_t offset = 0;  // set by place_by_liveness

  bool overlaps_in_time(const Occupant& other) const;
  bool overlaps_in_space(const Occupant& other) const {
    return bytes_overlap(offset, bytes, other.offset, other.bytes);
  }
};

// Sets every occupant's offset (multiples of `align` bytes) so that occupants alive at the same
// step never share a byte: each at the lowest offset that fits (first fit), as offset planners do,
// in the best of a few orders (largest first, or most bytes x steps first). Returns the arena's
// size.
int64_t place_by_liveness(std::vector<Occupant*> occupants, int64_t align);

// The most bytes alive at any one step: no placement can do with less.
int64_t peak_live_bytes(const std::vector<const Occupant*>& occupants);

}  // namespace cgdp
