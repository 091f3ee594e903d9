// Convolution on CUDA: cuDNN's forward, backward-data and backward-filter convolutions (cross-
// correlation, which is what im2col + GEMM computes; groups and dilation by the descriptor), the
// bias by cudnnAddTensor / cudnnConvolutionBackwardBias. Each pass runs the algorithm cuDNN's own
// search picked for the shape (src/cuda/conv_algorithms.hpp), within cuda_options()' scratch cap.
#include "cgdp/device/cuda_options.hpp"
#include "cgdp/layers/convolution_layer.hpp"
#include "cuda/conv_algorithms.hpp"
#include "cuda/conv_passes.hpp"
#include "cuda_layer.hpp"

namespace cgdp {


// (Re)describes the problem when the bottom shape or the CUDA options changed; the algorithms
// are then looked up again.
template <typename T>
LayerBackendState& ConvolutionLayer<T>::cuda_state(const Blob<T>& bottom, const Blob<T>& top) {
  auto& s = this->template backend_state<ConvCuda>();
  const CudaOptions& options = cuda_options();
  if (s.shape == bottom.shape() && s.options == options) return s;
  const ConvGeometry& g = geometry_;
  const Shape& in = bottom.shape();
  const Shape& out = top.shape();
  const cudnnDataType_t type = cudnn_data_type<T>();
  set_tensor(*this, s.x, in[0], in[1], in[2], in[3]);
  set_tensor(*this, s.y, out[0], out[1], out[2], out[3]);
  set_tensor(*this, s.bias, 1, num_output_, 1, 1);
  auto i = [this](int64_t v) { return as_int(*this, v, "convolution setting"); };
  CUDNN_CHECK(cudnnSetFilter4dDescriptor(s.w.get(), type, CUDNN_TENSOR_NCHW, i(num_output_),
                                         i(g.channels / group_), i(g.kernel_h), i(g.kernel_w)));
  CUDNN_CHECK(cudnnSetConvolution2dDescriptor(s.conv.get(), i(g.pad_h), i(g.pad_w), i(g.stride_h),
                                              i(g.stride_w), i(g.dilation_h), i(g.dilation_w),
                                              CUDNN_CROSS_CORRELATION, type));
  CUDNN_CHECK(cudnnSetConvolutionGroupCount(s.conv.get(), i(group_)));
  int dims[4] = {};
  CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(s.conv.get(), s.x.get(), s.w.get(), &dims[0],
                                                    &dims[1], &dims[2], &dims[3]));
  if (Shape(dims, dims + 4) != out)
    this->fail(cat("cuDNN computes the output shape ", shape_string(Shape(dims, dims + 4)),
                   ", the layer ", shape_string(out)));
  s.problem = {static_cast<int64_t>(sizeof(T)), in[0], in[1], in[2], in[3],
               num_output_, g.kernel_h, g.kernel_w, g.pad_h, g.pad_w, g.stride_h, g.stride_w,
               g.dilation_h, g.dilation_w, group_, options.tf32, options.deterministic,
               static_cast<int64_t>(options.workspace_limit_bytes)};
  s.forward.reset();
  s.backward_data.reset();
  s.backward_filter.reset();
  s.shape = in;
  s.options = options;
  return s;
}

template <typename T>
void ConvolutionLayer<T>::forward_cuda(const RunContext& ctx, const BlobVec<T>& bottom,
                                       const BlobVec<T>& top) {
  Stream& stream = layer_stream(*this, ctx);
  auto& s = static_cast<ConvCuda&>(cuda_state(*bottom[0], *top[0]));
  const cudnnHandle_t h = cudnn_handle(stream);
  const T* x = bottom[0]->data();
  const T* w = this->params_[0]->data();
  T* y = top[0]->mutable_data();
  if (!s.forward)
    s.forward = cached_conv_algorithm(ConvPass::Forward, this->device().index(), s.problem, [&] {
      return find_forward(s, h, stream, x, w, y, cat("layer '", this->name(), "' forward"));
    });
  CUDNN_CHECK(cudnnSetConvolutionMathType(s.conv.get(), s.forward->math));
  const T one = 1, zero = 0;
  CUDNN_CHECK(cudnnConvolutionForward(h, &one, s.x.get(), x, s.w.get(), w, s.conv.get(),
                                      cudnnConvolutionFwdAlgo_t(s.forward->algo),
                                      stream_workspace(stream, s.forward->workspace),
                                      s.forward->workspace, &zero, s.y.get(), y));
  if (bias_term_)
    CUDNN_CHECK(cudnnAddTensor(h, &one, s.bias.get(), this->params_[1]->data(), &one, s.y.get(), y));
}

template <typename T>
void ConvolutionLayer<T>::backward_cuda(const RunContext& ctx, const BlobVec<T>& top,
                                        const std::vector<bool>& propagate_down,
                                        const BlobVec<T>& bottom) {
  Stream& stream = layer_stream(*this, ctx);
  auto& s = static_cast<ConvCuda&>(cuda_state(*bottom[0], *top[0]));
  const cudnnHandle_t h = cudnn_handle(stream);
  const T* x = bottom[0]->data();
  const T* dy = top[0]->diff();
  const T one = 1, zero = 0;
  if (bias_term_)  // accumulates (+=), as every parameter gradient
    CUDNN_CHECK(cudnnConvolutionBackwardBias(h, &one, s.y.get(), dy, &one, s.bias.get(),
                                             this->params_[1]->mutable_diff()));
  if (!s.backward_filter)
    s.backward_filter = cached_conv_algorithm(ConvPass::BackwardFilter, this->device().index(), s.problem, [&] {
      return find_backward_filter(s, h, this->device(), stream, x, dy, this->params_[0]->count(),
                                  cat("layer '", this->name(), "' weight gradient"));
    });
  CUDNN_CHECK(cudnnSetConvolutionMathType(s.conv.get(), s.backward_filter->math));
  CUDNN_CHECK(cudnnConvolutionBackwardFilter(
      h, &one, s.x.get(), x, s.y.get(), dy, s.conv.get(),
      cudnnConvolutionBwdFilterAlgo_t(s.backward_filter->algo),
      stream_workspace(stream, s.backward_filter->workspace), s.backward_filter->workspace, &one,
      s.w.get(), this->params_[0]->mutable_diff()));
  if (!propagate_down[0]) return;
  const T* w = this->params_[0]->data();
  T* dx = bottom[0]->mutable_diff();
  if (!s.backward_data)
    s.backward_data =
        cached_conv_algorithm(ConvPass::BackwardData, this->device().index(), s.problem, [&] {
          return find_backward_data(s, h, stream, w, dy, dx,
                                    cat("layer '", this->name(), "' input gradient"));
        });
  CUDNN_CHECK(cudnnSetConvolutionMathType(s.conv.get(), s.backward_data->math));
  CUDNN_CHECK(cudnnConvolutionBackwardData(
      h, &one, s.w.get(), w, s.y.get(), dy, s.conv.get(),
      cudnnConvolutionBwdDataAlgo_t(s.backward_data->algo),
      stream_workspace(stream, s.backward_data->workspace), s.backward_data->workspace, &zero,
      s.x.get(), dx));
}

CGDP_INSTANTIATE_CUDA_LAYER(ConvolutionLayer)

}  // namespace cgdp
