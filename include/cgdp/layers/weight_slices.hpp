// How InnerProduct cuts its weight for its GEMMs (inner_product_slices.cpp): rows of W for the
// output and the weight gradient, columns for the input gradient, each slice at most
// weight_slice_bytes(). A weight streamed from host memory passes through the device one slice
// at a time; a resident one is multiplied in the same slices, so both give the same bits.
// Process-wide, like layer_precision(): set before nets are built.
#pragma once

#include <cstdint>

namespace cgdp {

// 64 MiB: VGG-16's fc6 in 7 slices, AlexNet's in 3; smaller weights whole. Few enough that the
// GEMMs' repacking of their other operand costs little, small enough for a stage on a budget.
inline constexpr int64_t kDefaultWeightSliceBytes = int64_t{64} << 20;
int64_t weight_slice_bytes();
void set_weight_slice_bytes(int64_t bytes);

// Sets weight_slice_bytes() for a scope (tests cut small weights into several slices).
class ScopedWeightSliceBytes {
 public:
  explicit ScopedWeightSliceBytes(int64_t bytes) : before_(weight_slice_bytes()) {
    set_weight_slice_bytes(bytes);
  }
  ~ScopedWeightSliceBytes() { set_weight_slice_bytes(before_); }
  ScopedWeightSliceBytes(const ScopedWeightSliceBytes&) = delete;
  ScopedWeightSliceBytes& operator=(const ScopedWeightSliceBytes&) = delete;

 private:
  int64_t before_;
};

// Equal slices of `total` items of `item_bytes` each, as few as keep each within
// weight_slice_bytes() (at least one item a slice): the items per slice.
int64_t items_per_weight_slice(int64_t total, int64_t item_bytes);

}  // namespace cgdp
