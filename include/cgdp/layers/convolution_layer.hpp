// Convolution: 2-D convolution of N x C x H x W blobs with Caffe's parameters
// (kernel/pad/stride/dilation, group, bias) and Caffe's weight layout
// [num_output, C / group, kernel_h, kernel_w]. On the CPU: im2col + GEMM here, or oneDNN for
// float with 8 or more input channels per group (src/layers/onednn_convolution.cpp) unless
// engine: CAFFE; on a GPU, cuDNN (convolution_layer_cuda.cpp).
#pragma once

#include <algorithm>
#include <array>
#include <memory>
#include <vector>

#include "cgdp/device/conv_algorithm_table.hpp"
#include "cgdp/device/layer_precision.hpp"
#include "cgdp/layers/im2col.hpp"
#include "cgdp/layers/layer.hpp"

namespace cgdp {

class OneDnnConvolution;
struct OneDnnShape;

template <typename T>
class ConvolutionLayer final : public Layer<T> {
 public:
  using Layer<T>::Layer;
  void reshape(const BlobVec<T>& bottom, const BlobVec<T>& top) override;
  ReluAbsorption absorb_relu() override;
  bool blocks_each_blob() const override { return true; }
  // On oneDNN, the layouts its kernels read and write (NHWC for the AMX bf16 ones, nChw16c for
  // AVX-512 fp32), so no reorder runs at its edges.
  int64_t preferred_channel_block(bool top) const override {
    return top ? preferred_dst_block_ : preferred_src_block_;
  }
  bool handles_channel_block(bool top, int64_t block) const override {
    return block == 1 || block == preferred_channel_block(top);
  }
  // Its input, and its output only when it runs an absorbed ReLU's backward.
  bool backward_reads(const Blob<T>& blob, const BlobVec<T>& bottom, const BlobVec<T>&) const override {
    return relu_backward_ || std::find(bottom.begin(), bottom.end(), &blob) != bottom.end();
  }
  // Its input is a rounded operand; an absorbed ReLU reads its output's sign (as ReLULayer's).
  bool backward_exact_from_16_bits(const Blob<T>& blob, const BlobVec<T>& bottom,
                                   const BlobVec<T>&) const override {
    return &blob == bottom[0] || keeps_signs(layer_precision());
  }
  bool backward_reads_only_sign(const Blob<T>& blob, const BlobVec<T>&,
                                const BlobVec<T>& top) const override {
    return relu_backward_ && &blob == top[0];
  }
  // An absorbed ReLU's mask from fp16, as ReLULayer's.
  bool backward_may_round(const Blob<T>&, const BlobVec<T>&, const BlobVec<T>&) const override {
    return true;
  }
  // It multiplies its input's 16-bit copy itself, and an absorbed ReLU reads the output's sign
  // from its copy.
  bool backward_reads_packed(const Blob<T>& blob, const BlobVec<T>& bottom,
                             const BlobVec<T>& top) const override {
    return &blob == bottom[0] || (relu_backward_ && &blob == top[0]);
  }

  // The per-image GEMM shapes, per group: out_channels x out_pixels (x) col_rows x out_pixels.
  int64_t group() const { return group_; }
  int64_t group_out_channels() const { return num_output_ / group_; }
  int64_t group_col_rows() const { return geometry_.col_rows() / group_; }
  int64_t out_pixels() const { return geometry_.out_h() * geometry_.out_w(); }
  // Whether the CPU passes run on oneDNN (float, built with it, engine not CAFFE, at least
  // kOneDnnMinChannels input channels per group).
  bool uses_onednn() const { return use_onednn_; }
  // On CUDA in bf16/fp16: whether cuDNN gets the 16-bit operands channels last (NHWC). Where
  // each group's input and output channels come in the 8s that its NHWC tensor-core kernels read
  // (16 bytes), unless `--layout nchw` (channel_blocks_enabled) keeps NCHW.
  bool cuda_channels_last() const;
  // What cuDNN's choices for this layer are keyed by (ConvChoiceKey::problem) for these shapes
  // under the current cuda_options() and layer_precision(): the CUDA half searches under it, and
  // the memory estimate looks stored choices up by it.
  std::vector<int64_t> cudnn_problem(const Shape& bottom, const Shape& top) const;
  // The passes the CUDA half runs: forward; in a backward the weight gradient, and the input's
  // when it propagates down (`input_gradient`).
  std::vector<ConvPassProblem> cudnn_passes(const Shape& bottom, const Shape& top, bool backward,
                                            bool input_gradient) const;

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
  // The oneDNN primitives for this batch and geometry (rebuilt when they change); null when
  // oneDNN is not used or has no implementation, and the GEMM path runs.
#ifdef CGDP_HAVE_ONEDNN
  OneDnnShape onednn_shape(int64_t batch, int64_t src_block = 1, int64_t dst_block = 1) const;
#endif
  // `src_block` and `dst_block`: the bottom's and top's channel blocks.
  OneDnnConvolution* onednn(int64_t batch, int64_t src_block = 1, int64_t dst_block = 1);
  // Whether `conv` multiplies bf16 itself (AVX512_BF16); otherwise a 16-bit precision rounds
  // the operands of the fp32 kernels (layers/rounded_operands.hpp).
  bool multiplies_bf16(OneDnnConvolution* conv) const;
  // With one group and an unfolded image, the bias rides in the GEMMs: a row of ones under the
  // column matrix meets the bias as one more weight column, so no pass over the output (forward)
  // or its gradient (backward) is left for it.
  bool folds_bias() const { return bias_term_ && group_ == 1 && !geometry_.is_pointwise(); }
  // Rows of one image's column matrix: the kernel taps, and the row of ones when folds_bias().
  int64_t unfolded_rows() const { return geometry_.col_rows() + (folds_bias() ? 1 : 0); }
  // Of them, one group's: the inner dimension of its weight-by-columns GEMM.
  int64_t group_unfolded_rows() const { return unfolded_rows() / group_; }
  // `work` is one thread's scratch (work_count() elements): the column matrix (unfolded_rows()
  // rows), then the padded image that im2col/col2im use. `weight` has unfolded_rows() columns.
  void forward_image(const T* in, T* out, T* work, const T* weight) const;
  // Fills `work` with the image's column matrix (and the row of ones); returns where the GEMMs
  // read the columns from: `work`, or the image itself for a pointwise kernel.
  const T* unfold(const T* in, T* work) const;
  // Accumulates this image's weight and bias gradients into param_diff[0] and [1] (with
  // folds_bias(), both into param_diff[0], laid out as the folded weights), and overwrites
  // `in_diff` unless it is null.
  // With an absorbed ReLU, `out` is the image's (clamped) output and `out_diff` is masked in
  // place where it is not positive; otherwise `out` is null.
  void backward_image(const T* in, const T* weight, const T* out, T* out_diff,
                      const std::array<T*, 2>& param_diff, T* in_diff, T* work) const;
  // With folds_bias(): `weight` with each output's bias after its own weights (a copy made
  // once per forward pass); otherwise `weight` itself.
  const T* gemm_weights(const T* weight);
  // Adds a folded gradient (each output's weight gradients, then its bias's) to the parameters'.
  void add_folded(const T* folded);
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
  // absorb_relu(): the following in-place ReLU's forward runs inside this layer, and its backward
  // too (the CPU's).
  bool relu_forward_ = false;
  bool relu_backward_ = false;
  bool use_onednn_ = false;
  int64_t preferred_src_block_ = 1, preferred_dst_block_ = 1;  // reshape() asks oneDNN
  std::shared_ptr<OneDnnConvolution> onednn_;  // shared_ptr: deletable where it is incomplete
  std::vector<T> work_;
  std::vector<T> folded_weight_;  // with folds_bias(): each output's weights, then its bias
  std::vector<T> param_diff_;     // private parameter gradients of the threads during backward
};

}  // namespace cgdp
