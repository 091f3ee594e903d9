// Deconvolution on the CPU, as Caffe computes it: per image and group, the columns are the weights'
// transpose times the input, folded onto the output by col2im; backward unfolds the output's
// gradient by im2col for the weights' and the input's gradients.
#include "cgdp/layers/deconvolution_layer.hpp"

#include <algorithm>

#include "cgdp/device/cuda_options.hpp"
#include "cgdp/device/layer_precision.hpp"
#include "cgdp/layers/blas.hpp"
#include "cgdp/layers/filler.hpp"
#include "cgdp/layers/spatial_param.hpp"
#include "layers/rounded_operands.hpp"

namespace cgdp {

template <typename T>
void DeconvolutionLayer<T>::layer_setup(const BlobVec<T>& bottom, const BlobVec<T>&, Rng& rng) {
  const auto& p = this->param_.convolution_param();
  if (bottom[0]->num_axes() != 4)
    this->fail(cat("needs a 4-D bottom (N x C x H x W), got ", shape_string(bottom[0]->shape())));
  output_geometry_ = kernel_geometry(p);
  num_output_ = p.num_output();
  group_ = p.group();
  bias_term_ = p.bias_term();
  in_channels_ = bottom[0]->shape(1);
  if (num_output_ <= 0) this->fail("needs num_output > 0");
  if (group_ <= 0 || in_channels_ % group_ != 0 || num_output_ % group_ != 0)
    this->fail(cat("group ", group_, " must divide the input channels (", in_channels_, ") and num_output (", num_output_, ")"));
  output_geometry_.channels = num_output_;
  fill(this->add_param({in_channels_, num_output_ / group_, output_geometry_.kernel_h, output_geometry_.kernel_w}),
       p.weight_filler(), rng);
  if (bias_term_) fill(this->add_param({num_output_}), p.bias_filler(), rng);
}

template <typename T>
void DeconvolutionLayer<T>::reshape(const BlobVec<T>& bottom, const BlobVec<T>& top) {
  const Blob<T>& in = *bottom[0];
  if (in.num_axes() != 4 || in.shape(1) != in_channels_)
    this->fail(cat("bottom ", shape_string(in.shape()), " does not match the weights' ", in_channels_, " input channels"));
  ConvGeometry& g = output_geometry_;
  g.height = g.stride_h * (in.shape(2) - 1) + g.extent_h() - 2 * g.pad_h;
  g.width = g.stride_w * (in.shape(3) - 1) + g.extent_w() - 2 * g.pad_w;
  if (g.height <= 0 || g.width <= 0)
    this->fail(cat("the padding leaves no output (", g.height, "x", g.width, ") for input ", in.shape(2), "x", in.shape(3)));
  in_pixels_ = in.shape(2) * in.shape(3);
  top[0]->reshape({in.shape(0), num_output_, g.height, g.width});
  col_.resize(static_cast<size_t>(g.col_rows() * in_pixels_));
  scratch_.resize(static_cast<size_t>(g.scratch_count()));
}

template <typename T>
void DeconvolutionLayer<T>::forward_cpu(const RunContext&, const BlobVec<T>& bottom, const BlobVec<T>& top) {
  const ConvGeometry& g = output_geometry_;
  const int64_t in_group = in_channels_ / group_, col_group = g.col_rows() / group_;
  const int64_t out_image = num_output_ * g.height * g.width;
  const T* w = operand(Operand::kWeight, this->params_[0]->data(), this->params_[0]->count());
  const T* input = operand(Operand::kInput, bottom[0]->data(), bottom[0]->count());
  for (int64_t n = 0; n < bottom[0]->shape(0); ++n) {
    const T* x = input + n * in_channels_ * in_pixels_;
    T* y = top[0]->mutable_data() + n * out_image;
    for (int64_t gr = 0; gr < group_; ++gr)  // col_g = W_g^T x_g
      blas::gemm(true, false, col_group, in_pixels_, in_group, T(1), w + gr * in_group * col_group,
                 x + gr * in_group * in_pixels_, T(0), col_.data() + gr * col_group * in_pixels_);
    col2im(col_.data(), g, y, scratch_.data());
    if (!bias_term_) continue;
    const T* bias = this->params_[1]->data();
    const int64_t plane = g.height * g.width;
    for (int64_t c = 0; c < num_output_; ++c)
      for (int64_t i = 0; i < plane; ++i) y[c * plane + i] += bias[c];
  }
}

template <typename T>
void DeconvolutionLayer<T>::backward_cpu(const RunContext&, const BlobVec<T>& top,
                                         const std::vector<bool>& propagate_down, const BlobVec<T>& bottom) {
  const ConvGeometry& g = output_geometry_;
  const int64_t in_group = in_channels_ / group_, col_group = g.col_rows() / group_;
  const int64_t out_image = num_output_ * g.height * g.width, plane = g.height * g.width;
  const T* w = operand(Operand::kWeight, this->params_[0]->data(), this->params_[0]->count());
  const T* input = operand(Operand::kInput, bottom[0]->data(), bottom[0]->count());
  round_in_place(top[0]->mutable_diff(), top[0]->count());
  T* dw = this->params_[0]->mutable_diff();
  for (int64_t n = 0; n < bottom[0]->shape(0); ++n) {
    const T* dy = top[0]->diff() + n * out_image;
    if (bias_term_) {
      T* db = this->params_[1]->mutable_diff();
      for (int64_t c = 0; c < num_output_; ++c) {
        double sum = 0;
        for (int64_t i = 0; i < plane; ++i) sum += dy[c * plane + i];
        db[c] += static_cast<T>(sum);
      }
    }
    im2col(dy, g, col_.data(), scratch_.data());
    const T* x = input + n * in_channels_ * in_pixels_;
    T* dx = propagate_down[0] ? bottom[0]->mutable_diff() + n * in_channels_ * in_pixels_ : nullptr;
    for (int64_t gr = 0; gr < group_; ++gr) {
      const T* col = col_.data() + gr * col_group * in_pixels_;
      // dW_g += x_g col_g^T; dx_g = W_g col_g
      blas::gemm(false, true, in_group, col_group, in_pixels_, T(1), x + gr * in_group * in_pixels_, col, T(1),
                 dw + gr * in_group * col_group);
      if (dx)
        blas::gemm(false, false, in_group, in_pixels_, col_group, T(1), w + gr * in_group * col_group, col, T(0),
                   dx + gr * in_group * in_pixels_);
    }
  }
}

template <typename T>
std::vector<int64_t> DeconvolutionLayer<T>::cudnn_problem(const Shape& in, const Shape& out) const {
  const ConvGeometry& g = output_geometry_;
  const CudaOptions& o = cuda_options();
  // The -1 keeps Deconvolution's problems apart from a Convolution's of the same numbers.
  std::vector<int64_t> problem{-1, static_cast<int64_t>(sizeof(T)), in[0], in[1], in[2], in[3]};
  problem.insert(problem.end(), {out[1], out[2], out[3], g.kernel_h, g.kernel_w, g.pad_h, g.pad_w,
                                 g.stride_h, g.stride_w, g.dilation_h, g.dilation_w, group_, o.tf32,
                                 o.deterministic, static_cast<int64_t>(o.workspace_limit_bytes)});
  if (multiplies_in_half<T>()) problem.push_back(static_cast<int64_t>(layer_precision()));
  return problem;
}

template <typename T>
std::vector<ConvPassProblem> DeconvolutionLayer<T>::cudnn_passes(const Shape& bottom,
                                                                 const Shape& top, bool backward,
                                                                 bool input_gradient) const {
  const std::vector<int64_t> problem = cudnn_problem(bottom, top);
  std::vector<ConvPassProblem> passes{{ConvPass::BackwardData, problem}};
  if (backward) passes.push_back({ConvPass::BackwardFilter, problem});
  if (backward && input_gradient) passes.push_back({ConvPass::Forward, problem});
  return passes;
}

template class DeconvolutionLayer<float>;
template class DeconvolutionLayer<double>;

}  // namespace cgdp
