// PReLU (He et al.): y = max(x, 0) + a_c min(x, 0) with a learnable slope per channel (axis 1), or
// one shared (channel_shared); the slopes start at 0.25 unless a filler says otherwise. In place,
// the input is kept for the slopes' gradient, as in Caffe.
#pragma once

#include "cgdp/layers/layer.hpp"

namespace cgdp {

template <typename T>
class PReLULayer final : public Layer<T> {
 public:
  bool can_run_in_place() const override { return true; }
  PReLULayer(const proto::LayerParameter& param, Device& device);
  void reshape(const BlobVec<T>& bottom, const BlobVec<T>& top) override;

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
  int64_t outer_ = 0, channels_ = 0, inner_ = 0;  // bottom viewed as outer x channels x inner
  bool shared_ = false;
  Blob<T> bottom_copy_;
};

}  // namespace cgdp
