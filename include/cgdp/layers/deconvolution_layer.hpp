// Deconvolution (Caffe's: the transpose of Convolution, the upsampling of FCN): weights
// [C_in, num_output / group, kernel_h, kernel_w] over convolution_param's kernel, pad, stride,
// dilation and group; output size stride * (in - 1) + dilation * (kernel - 1) + 1 - 2 * pad. On
// the CPU: a GEMM per group then col2im (deconvolution_layer.cpp); on a GPU, cuDNN's
// convolution passes with the roles of input and output swapped (deconvolution_layer_cuda.cpp).
#pragma once

#include <vector>

#include "cgdp/device/conv_algorithm_table.hpp"
#include "cgdp/layers/im2col.hpp"
#include "cgdp/layers/layer.hpp"

namespace cgdp {

template <typename T>
class DeconvolutionLayer final : public Layer<T> {
 public:
  using Layer<T>::Layer;
  void reshape(const BlobVec<T>& bottom, const BlobVec<T>& top) override;
  // Only its input, as a rounded operand of the weight gradient.
  bool backward_reads(const Blob<T>& blob, const BlobVec<T>& bottom,
                      const BlobVec<T>&) const override {
    return &blob == bottom[0];
  }
  bool backward_exact_from_16_bits(const Blob<T>&, const BlobVec<T>&,
                                   const BlobVec<T>&) const override {
    return true;
  }
  // As ConvolutionLayer's: the key of cuDNN's choices, and the passes (forward is the transposed
  // convolution's backward-data pass, the input gradient its forward pass).
  std::vector<int64_t> cudnn_problem(const Shape& bottom, const Shape& top) const;
  std::vector<ConvPassProblem> cudnn_passes(const Shape& bottom, const Shape& top, bool backward,
                                            bool input_gradient) const;

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
  // The convolution this layer transposes: over the *output* image (num_output channels), whose
  // output is the input's size.
  ConvGeometry output_geometry_;
  int64_t in_channels_ = 0, num_output_ = 0, group_ = 1, in_pixels_ = 0;
  bool bias_term_ = true;
  std::vector<T> col_, scratch_;  // one image's column matrix, and col2im/im2col's padded image
};

}  // namespace cgdp
