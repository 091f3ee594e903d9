// A count from the user that goes to a 32-bit field (Caffe's solver fields, a class count) is
// refused instead of wrapped around: 2^32 + 1 would have become 1.
#pragma once

#include <cstdint>
#include <string>

#include "cgdp/core/error.hpp"

namespace cgdp {

// UsageError naming `what` and the value when it does not fit an int32_t.
inline int32_t fit_int32(int64_t value, const std::string& what) {
  if (value > INT32_MAX || value < INT32_MIN)
    throw UsageError(
        cat(what, " ", value, ": more than a 32-bit field holds (at most ", INT32_MAX, ")"));
  return static_cast<int32_t>(value);
}

}  // namespace cgdp
