// Gradient accumulation over micro-batches (--accumulate M, Caffe's iter_size) in the binary-tree
// order of host_sum.hpp, so M micro-batches on one worker and M workers give the same bits.
#pragma once

#include <cstdint>
#include <vector>

#include "cgdp/device/device.hpp"

namespace cgdp {

class GradientFold {
 public:
  // `on_host`: the gradients folded live in pinned host memory (streamed weights, Net's
  // host_flat_diff), and so do the partial sums; host functions add them, in stream order.
  explicit GradientFold(bool on_host = false) : on_host_(on_host) {}
  // Issues on `stream`: folds micro-batch `micro`'s gradients (n elements at `diff`, micro = 0, 1,
  // ... within an iteration, not the last one) into the pending partial sums.
  void add(Device& device, Stream& stream, const float* diff, int64_t n, int micro);
  // Issues on `stream`: diff[begin, end) becomes the tree sum of the earlier micro-batches and
  // itself, the last micro-batch `micro`.
  void fold_into(Device& device, Stream& stream, float* diff, int64_t begin, int64_t end, int micro);

 private:
  float* partial(int depth) const;
  void sum(Device& device, Stream& stream, float* dst, std::vector<const float*> srcs, int64_t n);

  bool on_host_ = false;
  // Partial sums pending after micro-batch k: one per set bit of k + 1, largest first (in
  // host_partials_ when on_host_).
  std::vector<DeviceBuffer> partials_;
  std::vector<PinnedHostBuffer> host_partials_;
};

}  // namespace cgdp
