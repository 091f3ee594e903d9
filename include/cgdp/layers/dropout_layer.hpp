// Dropout: in training, zeroes each element with probability dropout_ratio and scales the kept
// ones by 1 / (1 - dropout_ratio); identity in testing. May run in place.
#pragma once

#include "cgdp/layers/layer.hpp"

namespace cgdp {

template <typename T>
class DropoutLayer final : public Layer<T> {
 public:
  bool can_run_in_place() const override { return true; }
  // Its backward reads no values (gradients only, and its mask).
  bool backward_reads(const Blob<T>&, const BlobVec<T>&, const BlobVec<T>&) const override {
    return false;
  }
  DropoutLayer(const proto::LayerParameter& param, Device& device);
  void reshape(const BlobVec<T>& bottom, const BlobVec<T>& top) override;

 protected:
  void layer_setup(const BlobVec<T>& bottom, const BlobVec<T>& top, Rng& rng) override;
  void forward_cpu(const RunContext& ctx, const BlobVec<T>& bottom, const BlobVec<T>& top) override;
  void backward_cpu(const RunContext& ctx, const BlobVec<T>& top,
                    const std::vector<bool>& propagate_down, const BlobVec<T>& bottom) override;
#ifdef CGDP_HAVE_CUDA
  void forward_cuda(const RunContext& ctx, const BlobVec<T>& bottom, const BlobVec<T>& top) override;
  void backward_cuda(const RunContext& ctx, const BlobVec<T>& top,
                     const std::vector<bool>& propagate_down, const BlobVec<T>& bottom) override;
#endif

 private:
  // Fills mask_ with 0 or 1/(1-p). Element j of global sample s depends only on
  // (ctx.seed, layer name, ctx.iteration, s, j), so workers holding slices of a global batch
  // draw exactly the masks of one worker holding all of it.
  void draw_mask(const RunContext& ctx, int64_t samples, int64_t per_sample);

  uint64_t name_hash_;
  bool train_ = false;  // phase of the last forward, which backward mirrors
  Blob<T> mask_;        // per element: 0 (dropped) or the keep scale
};

}  // namespace cgdp
