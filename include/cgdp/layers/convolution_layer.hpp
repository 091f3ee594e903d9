// Convolution: 2-D convolution of N x C x H x W blobs by im2col + GEMM, with Caffe's parameters
// (kernel/pad/stride/dilation, group, bias) and Caffe's weight layout
// [num_output, C / group, kernel_h, kernel_w].
#pragma once

#include <array>
#include <vector>

#include "cgdp/layers/im2col.hpp"
#include "cgdp/layers/layer.hpp"

namespace cgdp {

template <typename T>
class ConvolutionLayer final : public Layer<T> {
 public:
  using Layer<T>::Layer;
  void reshape(const BlobVec<T>& bottom, const BlobVec<T>& top) override;

  // The per-image GEMM shapes, per group: out_channels x out_pixels (x) col_rows x out_pixels.
  int64_t group() const { return group_; }
  int64_t group_out_channels() const { return num_output_ / group_; }
  int64_t group_col_rows() const { return geometry_.col_rows() / group_; }
  int64_t out_pixels() const { return geometry_.out_h() * geometry_.out_w(); }

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
  void read_geometry();
  // `work` is one thread's scratch (work_count() elements): the column matrix, then the padded
  // image that im2col/col2im use.
  void forward_image(const T* in, T* out, T* work) const;
  // Accumulates this image's weight and bias gradients into param_diff[0] and [1], and
  // overwrites `in_diff` unless it is null.
  void backward_image(const T* in, const T* out_diff, const std::array<T*, 2>& param_diff,
                      T* in_diff, T* work) const;
  int64_t work_count() const;
  // Scratch for `threads` threads, work_count() elements each.
  T* work_buffer(int threads);
#ifdef CGDP_HAVE_CUDA
  // cuDNN's descriptors and chosen algorithms for this bottom (convolution_layer_cuda.cpp).
  LayerBackendState& cuda_state(const Blob<T>& bottom, const Blob<T>& top);
#endif

  ConvGeometry geometry_;  // channels/height/width follow the bottom; the rest is the kernel's
  int64_t num_output_ = 0;
  int64_t group_ = 1;
  bool bias_term_ = true;
  std::vector<T> work_;
  std::vector<T> param_diff_;  // private parameter gradients of threads 1.. during backward
};

}  // namespace cgdp
