// LRN: local response normalisation of N x C x H x W blobs, top = x * scale^-beta, as Caffe
// computes it. ACROSS_CHANNELS: scale = k + alpha / local_size * (sum of x^2 over local_size
// neighbouring channels). WITHIN_CHANNEL: scale = 1 + alpha / local_size^2 * (sum of x^2 over a
// local_size x local_size square, zero-padded); Caffe builds this from pooling and power layers
// with shift 1, so k does not enter it.
#pragma once

#include <vector>

#include "cgdp/device/layer_precision.hpp"
#include "cgdp/layers/layer.hpp"

namespace cgdp {

template <typename T>
class LRNLayer final : public Layer<T> {
 public:
  using Layer<T>::Layer;
  void reshape(const BlobVec<T>& bottom, const BlobVec<T>& top) override;
  // ACROSS_CHANNELS on the CPU reads and writes any channel block.
  bool handles_channel_block(bool top, int64_t block) const override;
  // Whether the CUDA half runs lrn_column.hpp's column kernels, which keep nothing between forward
  // and backward (ACROSS_CHANNELS with a window their rings hold), rather than the kernels that
  // compute it as the CPU does.
  bool cuda_runs_columns() const;
  // Bytes the layer keeps between calls on a device of `kind` (`backward`: once a backward ran):
  // the CPU's scale (and WITHIN_CHANNEL's work buffer); on CUDA nothing for the column kernels
  // (backward computes the scale again, lrn_column.hpp), else the kernels' scale and, for backward,
  // a work buffer (lrn_layer_cuda.cpp).
  int64_t kept_bytes(DeviceKind kind, bool backward) const;
  int64_t cuda_buffer_bytes(bool backward) const override {
    return kept_bytes(DeviceKind::Cuda, backward);
  }
  // Backward computes the output again from the input (and, where kept, the scale): its top's
  // values are free once its last forward reader ran, as large as they are.
  bool backward_reads(const Blob<T>& blob, const BlobVec<T>& bottom,
                      const BlobVec<T>&) const override {
    return &blob == bottom[0];
  }
  // Its input meets only fp32 sums (the scale's squares, the ratios' window): in bf16 its gradient
  // moves by a few roundings (LrnFrom16Bits), as under PyTorch's AMP, which even squares it in
  // bf16. Not in fp16, whose range an input not yet normalised may exceed.
  bool backward_may_round(const Blob<T>& blob, const BlobVec<T>& bottom,
                          const BlobVec<T>&) const override {
    return &blob == bottom[0] && layer_precision() == Precision::kBf16;
  }
  // Across channels, and every CUDA kernel, read each element of the output's gradient for the
  // last time before they write that of the input's (the CPU's WITHIN_CHANNEL does not).
  bool gradient_in_place() const override {
    return across_channels_ || this->device().kind() == DeviceKind::Cuda;
  }
  // Every variant reads a tile's (or the whole input's) squares before it writes any of the tile's
  // outputs.
  bool forward_in_place() const override { return true; }
  // ACROSS_CHANNELS reads that input from its bf16 copy itself (on CUDA, the column kernels'
  // backward).
  bool backward_reads_packed(const Blob<T>& blob, const BlobVec<T>& bottom,
                             const BlobVec<T>&) const override {
    return &blob == bottom[0] && across_channels_ &&
           (this->device().kind() == DeviceKind::Cpu || cuda_runs_columns());
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
  // WITHIN_CHANNEL: dst = sum of src over each element's square neighbourhood.
  void window_sum(const T* src, T* dst) const;
  // ACROSS_CHANNELS, fused per tile of an image's columns, whose channels stay in cache.
  void forward_across(const T* in, T* out);
  // `packed`: the input's bf16 copy (Blob::packed_values), read instead of `in` when not null.
  void backward_across(const T* in, const uint16_t* packed, const T* out_diff, T* in_diff) const;
  // ACROSS_CHANNELS with the blobs (and scale_) in channel block `block` > 1: tiles of positions.
  void forward_blocked(const T* in, T* out, int64_t block);
  void backward_blocked(const T* in, const uint16_t* packed, const T* out_diff, T* in_diff,
                        int64_t block) const;

  bool across_channels_ = true;
  int64_t size_ = 5;
  T alpha_over_n_ = 0;  // alpha divided by the neighbourhood's element count
  T beta_ = 0;
  T k_ = 1;
  Shape shape_;
  // Device memory (counted as the layer's scratch, never gradients): kept from forward for
  // backward.
  Blob<T> scale_{this->device(), Shape{0}, Diff::None};
  // WITHIN_CHANNEL: squares in forward, top_diff * top / scale in backward.
  Blob<T> work_{this->device(), Shape{0}, Diff::None};
};

}  // namespace cgdp
