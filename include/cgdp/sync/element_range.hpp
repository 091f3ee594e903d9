// A run of elements of the flat gradient buffer.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

namespace cgdp {

struct ElementRange {
  int64_t offset = 0;
  int64_t count = 0;
  bool operator==(const ElementRange&) const = default;
};

// `parts` cut into pieces of at most `max_count` elements each (> 0), in order; a piece never
// spans two parts.
inline std::vector<ElementRange> split_into_pieces(std::span<const ElementRange> parts,
                                                   int64_t max_count) {
  std::vector<ElementRange> pieces;
  for (const ElementRange& part : parts)
    for (int64_t at = 0; at < part.count; at += max_count)
      pieces.push_back({part.offset + at, std::min(max_count, part.count - at)});
  return pieces;
}

}  // namespace cgdp
