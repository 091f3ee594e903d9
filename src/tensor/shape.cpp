// Shape arithmetic shared by blobs and layers.
#include "cgdp/tensor/shape.hpp"

#include "cgdp/core/error.hpp"

namespace cgdp {

int64_t count_of(const Shape& shape) {
  return count_of(shape, 0, static_cast<int>(shape.size()));
}

int64_t count_of(const Shape& shape, int begin, int end) {
  CGDP_ASSERT(begin >= 0 && begin <= end && end <= static_cast<int>(shape.size()));
  int64_t n = 1;
  for (int i = begin; i < end; ++i)
    if (__builtin_mul_overflow(n, shape[i], &n))
      throw Error(cat("shape ", shape_string(shape), " has more elements than 64 bits count"));
  return n;
}

std::string shape_string(const Shape& shape) {
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += 'x';
    s += std::to_string(shape[i]);
  }
  return s.empty() ? "scalar" : s;
}

int canonical_axis(const Shape& shape, int axis) {
  const int n = static_cast<int>(shape.size());
  if (axis < -n || axis >= n)
    throw ModelError(
        cat("axis ", axis, " is out of range for a blob of shape ", shape_string(shape)));
  return axis < 0 ? axis + n : axis;
}

}  // namespace cgdp
