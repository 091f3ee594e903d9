// The process-wide size of InnerProduct's weight slices (weight_slices.hpp).
#include "cgdp/layers/weight_slices.hpp"

#include <algorithm>
#include <atomic>

namespace cgdp {

namespace {

std::atomic<int64_t> slice_bytes{kDefaultWeightSliceBytes};

}  // namespace

int64_t weight_slice_bytes() {
  return slice_bytes.load();
}

void set_weight_slice_bytes(int64_t bytes) {
  slice_bytes.store(std::max<int64_t>(bytes, 1));
}

int64_t items_per_weight_slice(int64_t total, int64_t item_bytes) {
  if (total <= 0) return 1;
  const int64_t fit = std::max<int64_t>(1, weight_slice_bytes() / std::max<int64_t>(item_bytes, 1));
  const int64_t slices = (total + fit - 1) / fit;
  return (total + slices - 1) / slices;
}

}  // namespace cgdp
