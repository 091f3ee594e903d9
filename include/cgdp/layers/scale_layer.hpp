// Scale (Caffe's, one-bottom form): y = x * scale (+ bias), the learnable scale of shape
// bottom.shape[axis : axis + num_axes] broadcast over the other axes. Params: scale, then bias
// when bias_term. May run in place.
#pragma once

#include "cgdp/layers/layer.hpp"
#include "cgdp/tensor/channel_blocks.hpp"

namespace cgdp {

template <typename T>
class BatchNormLayer;

template <typename T>
class ScaleLayer final : public Layer<T> {
 public:
  bool can_run_in_place() const override { return true; }
  ScaleLayer(const proto::LayerParameter& param, Device& device);
  void reshape(const BlobVec<T>& bottom, const BlobVec<T>& top) override;
  void use_kept_input(const Blob<T>* kept) override { kept_input_ = kept; }
  // Its input when out of place; in place it reads a kept copy instead.
  bool backward_reads(const Blob<T>& blob, const BlobVec<T>& bottom, const BlobVec<T>& top) const override {
    return &blob == bottom[0] && top[0] != bottom[0];
  }
  bool reads_kept_input() const { return kept_input_ != nullptr; }
  // One scale per channel (axis 1): what BatchNormLayer::take_over_scale takes.
  bool scales_channels() const { return axis_ == 1 && scale_dim_ == channels_; }
  // Hands this layer's work to the BatchNorm it runs in place after (Net::fuse_batch_norm_scales):
  // its forward then does nothing, and its backward runs both layers'.
  void run_inside(BatchNormLayer<T>& batch_norm);
  // On CUDA, inside a BatchNorm, the in-place ReLU after it runs in that BatchNorm's forward too
  // (its backward stays a step of its own).
  ReluAbsorption absorb_relu() override;
  // Any block on the CPU when it scales the channels (axis 1, one scale per channel): its sums
  // per channel keep NCHW's order (ChannelRuns).
  bool handles_channel_block(bool, int64_t block) const override {
    return block == 1 ||
           (this->device().kind() == DeviceKind::Cpu && axis_ == 1 && scale_dim_ == channels_);
  }

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
  int axis_ = 1;
  int64_t outer_ = 0, scale_dim_ = 0, inner_ = 0;  // bottom viewed as outer x scale_dim x inner
  int64_t channels_ = 0;                           // bottom's axis 1
  // The bottom as images x scale_dim x inner in its channel block (blocked only when scale_dim
  // is the channels).
  ChannelRuns runs(const Blob<T>& bottom) const {
    return {outer_, scale_dim_, inner_, bottom.channel_block()};
  }
  Blob<T> bottom_copy_;  // the input, kept when running in place (the scale's gradient needs it)
  const Blob<T>* kept_input_ = nullptr;  // in place after a BatchNorm: its copy of our input
  BatchNormLayer<T>* batch_norm_ = nullptr;  // run_inside

  bool copies_input(const BlobVec<T>& bottom, const BlobVec<T>& top) const {
    return top[0] == bottom[0] && kept_input_ == nullptr && !this->forward_only_;
  }
  // The input's values in backward: the bottom, or its kept copy when running in place.
  const T* input_for_backward(const BlobVec<T>& bottom, const BlobVec<T>& top) const {
    return top[0] != bottom[0] ? bottom[0]->data() : kept_input_ ? kept_input_->data() : bottom_copy_.data();
  }
};

}  // namespace cgdp
