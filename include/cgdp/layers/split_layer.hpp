// Split: one bottom to any number of tops (the net inserts it where a blob fans out), shared or
// copied; backward sums the tops' diffs.
#pragma once

#include "cgdp/layers/layer.hpp"

namespace cgdp {

template <typename T>
class SplitLayer final : public Layer<T> {
 public:
  using Layer<T>::Layer;
  void reshape(const BlobVec<T>& bottom, const BlobVec<T>& top) override;
  int max_tops() const override { return -1; }
  // Each element alike and alone: any layout, the same on all its blobs.
  bool handles_channel_block(bool, int64_t) const override { return true; }
  // Its backward reads no values (gradients only).
  bool backward_reads(const Blob<T>&, const BlobVec<T>&, const BlobVec<T>&) const override {
    return false;
  }
  // The tops read the bottom's values instead of copies (as Caffe's Split); the net asks for it
  // when no later layer writes the bottom or a top in place. Before setup.
  void share_bottom_data() { shares_ = true; }
  bool shares_bottom_data() const { return shares_; }

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
  bool shares_ = false;
};

}  // namespace cgdp
