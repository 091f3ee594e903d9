// Concat: joins bottoms along `axis` (default 1, channels); all other dimensions must match.
#pragma once

#include <algorithm>
#include <vector>

#include "cgdp/layers/layer.hpp"

namespace cgdp {

template <typename T>
class ConcatLayer final : public Layer<T> {
 public:
  using Layer<T>::Layer;
  void reshape(const BlobVec<T>& bottom, const BlobVec<T>& top) override;
  int max_bottoms() const override { return -1; }
  // Along the channels, a block that divides every bottom's: each image of a bottom is then one
  // slab of whole blocks in the top's image, as in NCHW.
  bool handles_channel_block(bool, int64_t block) const override {
    return block == 1 || (axis_ == 1 && std::all_of(channels_.begin(), channels_.end(),
                                                    [&](int64_t c) { return c % block == 0; }));
  }
  // Its backward reads no values (gradients only).
  bool backward_reads(const Blob<T>&, const BlobVec<T>&, const BlobVec<T>&) const override {
    return false;
  }

 protected:
  void forward_cpu(const RunContext& ctx, const BlobVec<T>& bottom, const BlobVec<T>& top) override;
  void backward_cpu(const RunContext& ctx, const BlobVec<T>& top,
                    const std::vector<bool>& propagate_down, const BlobVec<T>& bottom) override;
#ifdef CGDP_HAVE_CUDA
  void forward_cuda(const RunContext& ctx, const BlobVec<T>& bottom, const BlobVec<T>& top) override;
  void backward_cuda(const RunContext& ctx, const BlobVec<T>& top,
                     const std::vector<bool>& propagate_down, const BlobVec<T>& bottom) override;
#endif

 private:
  int axis_ = 1;
  int64_t outer_ = 0, inner_ = 0;  // count before and after the concat axis
  std::vector<int64_t> channels_;  // each bottom's length along the concat axis
};

}  // namespace cgdp
