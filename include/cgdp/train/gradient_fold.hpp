// Gradient accumulation over micro-batches (--accumulate M, Caffe's iter_size) in the binary-tree
// order of host_sum.hpp, so M micro-batches on one worker and M workers give the same bits.
#pragma once

#include <cstdint>
#include <vector>

#include "cgdp/device/device.hpp"

namespace cgdp {

class GradientFold {
 public:
  // Issues on `stream`: folds micro-batch `micro`'s gradients (n elements at `diff`, micro = 0, 1,
  // ... within an iteration, not the last one) into the pending partial sums.
  void add(Device& device, Stream& stream, const float* diff, int64_t n, int micro);
  // Issues on `stream`: diff[begin, end) becomes the tree sum of the earlier micro-batches and
  // itself, the last micro-batch `micro`.
  void fold_into(Device& device, Stream& stream, float* diff, int64_t begin, int64_t end, int micro);

 private:
  // Partial sums pending after micro-batch k: one per set bit of k + 1, largest first.
  std::vector<DeviceBuffer> partials_;
};

}  // namespace cgdp
