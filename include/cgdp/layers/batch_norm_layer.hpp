// BatchNorm (Caffe's): normalises each channel (axis 1) to zero mean and unit variance, with batch
// statistics in training and the running statistics when use_global_stats. No learnable
// parameters (a Scale layer follows it); state() holds Caffe's three blobs in Caffe's order:
// running mean sum [C], running variance sum [C], and their scale factor [1].
#pragma once

#include "cgdp/layers/layer.hpp"
#include "cgdp/tensor/channel_blocks.hpp"

namespace cgdp {

template <typename T>
class BatchNormLayer final : public Layer<T> {
 public:
  bool can_run_in_place() const override { return true; }
  BatchNormLayer(const proto::LayerParameter& param, Device& device);
  void reshape(const BlobVec<T>& bottom, const BlobVec<T>& top) override;
  // Any block on the CPU: its per-channel sums keep NCHW's order (ChannelRuns).
  bool handles_channel_block(bool, int64_t block) const override {
    return block == 1 || this->device().kind() == DeviceKind::Cpu;
  }
  const Blob<T>* kept_top() const override { return this->forward_only_ ? nullptr : &x_norm_; }
  // Its kept values: zero mean, unit variance per channel; backward's sums over them run in double.
  bool backward_may_round(const Blob<T>& blob, const BlobVec<T>&,
                          const BlobVec<T>&) const override {
    return &blob == &x_norm_;
  }
  // Backward reads only its own copy of the normalised values and the deviations.
  bool backward_reads(const Blob<T>&, const BlobVec<T>&, const BlobVec<T>&) const override { return false; }

  // Takes over a Scale (one scale per channel, and `bias` or none) in place right after it
  // (Net::fuse_batch_norm_scales): forward writes the scaled values while each run of channels
  // is in cache (CUDA: in the same kernel), and the Scale's backward calls
  // backward_through_scale while this layer's own does nothing. One pass over the values fewer
  // each way; on the CPU the same bits.
  void take_over_scale(const Blob<T>& scale, const Blob<T>* bias) {
    scale_ = &scale;
    bias_ = bias;
  }
  bool took_over_scale() const { return scale_ != nullptr; }
  // With a Scale taken over, forward also runs the in-place ReLU (negative_slope 0) after it, in
  // the ReLU kernel's own expression (ScaleLayer::absorb_relu; CUDA).
  void clamp_scaled_output() { relu_ = true; }
  bool clamps_scaled_output() const { return relu_; }
  // Both backwards in one: the Scale's parameter gradients (+=) from the top's gradient `dy`,
  // and this layer's input gradient `dx` (which may be `dy` itself), each with the bits of the
  // two layers run apart.
  void backward_through_scale(const RunContext& ctx, const T* dy, T* scale_diff, T* bias_diff,
                              T* dx);

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
#ifdef CGDP_HAVE_CUDA
  void backward_through_scale_cuda(const RunContext& ctx, const T* dy, T* scale_diff, T* bias_diff,
                                   T* dx);
#endif
  // Run by run: in training the batch's mean and biased variance into mean_ and variance_, then
  // inv_std_, then the run's normalised values (and scaled output), while the run is in cache.
  void normalise(const T* x, T* x_norm, T* y, const ChannelRuns& runs);
  // Run by run: the per-channel sums backward needs (with a Scale taken over, its gradients
  // too), then the run's input gradient, while the run is still in cache.
  void backward_runs(const T* dy, T* scale_diff, T* bias_diff, T* dx);
  // Caffe's running update: sums decay by moving_average_fraction, the factor counts batches.
  void update_running_statistics();

  int64_t num_ = 0, channels_ = 0, spatial_ = 0;  // bottom viewed as num x channels x spatial
  bool use_global_stats_ = false;  // mode of the last forward, which backward mirrors
  int64_t block_ = 1;              // the channel block of the last forward's blobs
  Blob<T> mean_;                   // [C] statistics used by the last forward
  Blob<T> variance_;               // [C]
  Blob<T> inv_std_;                // [C] 1 / sqrt(variance + eps)
  Blob<T> x_norm_;  // the normalised output, kept for backward (the top may be overwritten)
  const Blob<T>* scale_ = nullptr;  // a Scale's parameters taken over (take_over_scale)
  const Blob<T>* bias_ = nullptr;
  bool relu_ = false;  // clamp_scaled_output
};

}  // namespace cgdp
