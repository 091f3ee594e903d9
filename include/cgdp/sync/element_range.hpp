// A run of elements of the flat gradient buffer.
#pragma once

#include <cstdint>

namespace cgdp {

struct ElementRange {
  int64_t offset = 0;
  int64_t count = 0;
  bool operator==(const ElementRange&) const = default;
};

}  // namespace cgdp
