// Bias (Caffe's, one-bottom form): y = x + bias, the learnable bias of shape
// bottom.shape[axis : axis + num_axes] broadcast over the other axes (filler default 0). May run
// in place.
#pragma once

#include "cgdp/layers/layer.hpp"

namespace cgdp {

template <typename T>
class BiasLayer final : public Layer<T> {
 public:
  using Layer<T>::Layer;
  bool can_run_in_place() const override { return true; }
  void reshape(const BlobVec<T>& bottom, const BlobVec<T>& top) override;
  // Scale's kernels run it: a scale of ones and its unused gradient, one per channel each.
  int64_t cuda_buffer_bytes(bool) const override {
    return 2 * dim_ * static_cast<int64_t>(sizeof(T));
  }
  int max_bottoms() const override { return 2; }  // so that layer_setup names the form it refuses

 protected:
  void layer_setup(const BlobVec<T>& bottom, const BlobVec<T>& top, Rng& rng) override;
  void forward_cpu(const RunContext& ctx, const BlobVec<T>& bottom, const BlobVec<T>& top) override;
  void backward_cpu(const RunContext& ctx, const BlobVec<T>& top, const std::vector<bool>& propagate_down,
                    const BlobVec<T>& bottom) override;
#ifdef CGDP_HAVE_CUDA
  void forward_cuda(const RunContext& ctx, const BlobVec<T>& bottom, const BlobVec<T>& top) override;
  void backward_cuda(const RunContext& ctx, const BlobVec<T>& top, const std::vector<bool>& propagate_down,
                     const BlobVec<T>& bottom) override;
#endif

 private:
  int axis_ = 1;
  int64_t outer_ = 0, dim_ = 0, inner_ = 0;  // bottom viewed as outer x dim x inner
};

}  // namespace cgdp
