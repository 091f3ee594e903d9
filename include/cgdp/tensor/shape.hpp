// Tensor shapes: a list of dimensions, outermost first (N, C, H, W for images).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace cgdp {

using Shape = std::vector<int64_t>;

// Number of elements; 1 for a scalar (empty shape).
int64_t count_of(const Shape& shape);
// Elements from axis `begin` (inclusive) to `end` (exclusive).
int64_t count_of(const Shape& shape, int begin, int end);
// "2x3x28x28"
std::string shape_string(const Shape& shape);
// Turns a negative axis (-1 = last) into a positive one; throws if out of range.
int canonical_axis(const Shape& shape, int axis);

}  // namespace cgdp
