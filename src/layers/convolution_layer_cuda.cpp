// Convolution on CUDA: cuDNN's forward, backward-data and backward-filter convolutions (cross-
// correlation, which is what im2col + GEMM computes; groups and dilation by the descriptor), the
// bias by cudnnAddTensor / cudnnConvolutionBackwardBias. Each pass runs the algorithm cuDNN's own
// search picked for the shape (src/cuda/conv_algorithms.hpp), within cuda_options()' scratch cap.
// In bf16/fp16 the passes multiply 16-bit copies of their operands (cuda/half_operands.hpp), laid
// out channels last (NHWC) where the channels come in 8s (cuda_channels_last), and the forward's
// bias and the following ReLU's forward (absorb_relu) join its result as that is widened.
#include "cgdp/device/cuda_options.hpp"
#include "cgdp/layers/convolution_layer.hpp"
#include "cuda/conv_algorithms.hpp"
#include "cuda/conv_passes.hpp"
#include "cuda_layer.hpp"
#include "relu.cuh"

namespace cgdp {

// (Re)describes the problem when the bottom shape, the CUDA options or the precision changed;
// the algorithms are then looked up again.
template <typename T>
LayerBackendState& ConvolutionLayer<T>::cuda_state(const Blob<T>& bottom, const Blob<T>& top) {
  auto& s = this->template backend_state<ConvCuda>();
  if (s.describes(bottom.shape())) return s;
  const ConvGeometry& g = geometry_;
  const Shape& in = bottom.shape();
  const Shape& out = top.shape();
  s.operands = conv_operands<T>();
  const bool last = s.half() && cuda_channels_last();
  s.x_layout = {last, in[0], in[1], in[2] * in[3]};
  s.y_layout = {last, out[0], out[1], out[2] * out[3]};
  s.w_layout = {last, num_output_, g.channels / group_, g.kernel_h * g.kernel_w};
  const cudnnDataType_t type = conv_operand_type<T>(s.operands);
  set_tensor(*this, s.x, in[0], in[1], in[2], in[3], type, s.format());
  set_tensor(*this, s.y, out[0], out[1], out[2], out[3], type, s.format());
  set_tensor(*this, s.output, out[0], out[1], out[2], out[3]);
  set_tensor(*this, s.bias, 1, num_output_, 1, 1);
  auto i = [this](int64_t v) { return as_int(*this, v, "convolution setting"); };
  CUDNN_CHECK(cudnnSetFilter4dDescriptor(s.w.get(), type, s.format(), i(num_output_),
                                         i(g.channels / group_), i(g.kernel_h), i(g.kernel_w)));
  // The sums run in T (fp32 for 16-bit operands).
  CUDNN_CHECK(cudnnSetConvolution2dDescriptor(s.conv.get(), i(g.pad_h), i(g.pad_w), i(g.stride_h),
                                              i(g.stride_w), i(g.dilation_h), i(g.dilation_w),
                                              CUDNN_CROSS_CORRELATION, cudnn_data_type<T>()));
  CUDNN_CHECK(cudnnSetConvolutionGroupCount(s.conv.get(), i(group_)));
  int dims[4] = {};
  CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(s.conv.get(), s.x.get(), s.w.get(), &dims[0],
                                                    &dims[1], &dims[2], &dims[3]));
  if (Shape(dims, dims + 4) != out)
    this->fail(cat("cuDNN computes the output shape ", shape_string(Shape(dims, dims + 4)),
                   ", the layer ", shape_string(out)));
  described(s, in, cudnn_problem(in, out));
  return s;
}

template <typename T>
void ConvolutionLayer<T>::forward_cuda(const RunContext& ctx, const BlobVec<T>& bottom,
                                       const BlobVec<T>& top) {
  Stream& stream = layer_stream(*this, ctx);
  auto& s = static_cast<ConvCuda&>(cuda_state(*bottom[0], *top[0]));
  const cudnnHandle_t h = cudnn_handle(stream);
  const int64_t inputs = bottom[0]->count(), outputs = top[0]->count(),
                weights = this->params_[0]->count();
  const HalfOperands o =
      s.half() ? half_operands(stream, inputs, outputs, weights) : HalfOperands{};
  const void* x = operand_for(s.half(), stream, bottom[0]->data(), o.input, inputs, s.x_layout);
  const void* w =
      operand_for(s.half(), stream, this->params_[0]->data(), o.weights, weights, s.w_layout);
  void* y = result_for(s.half(), top[0]->mutable_data(), o.output);
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
  // In 16 bits the bias and the absorbed ReLU join the result as it is widened.
  const T* bias = bias_term_ ? this->params_[1]->data() : nullptr;
  if (land_forward(s.half(), stream, o.output, top[0]->mutable_data(), s.y_layout, bias,
                   relu_forward_))
    return;
  if (bias)
    CUDNN_CHECK(
        cudnnAddTensor(h, &one, s.bias.get(), bias, &one, s.output.get(), top[0]->mutable_data()));
  if (relu_forward_)  // a net built under a 16-bit precision, run in fp32
    kernels::relu_forward(top[0]->data(), top[0]->mutable_data(), outputs, T(0),
                          native_stream(stream));
}

template <typename T>
void ConvolutionLayer<T>::backward_cuda(const RunContext& ctx, const BlobVec<T>& top,
                                        const std::vector<bool>& propagate_down,
                                        const BlobVec<T>& bottom) {
  Stream& stream = layer_stream(*this, ctx);
  auto& s = static_cast<ConvCuda&>(cuda_state(*bottom[0], *top[0]));
  const cudnnHandle_t h = cudnn_handle(stream);
  const T one = 1, zero = 0;
  if (bias_term_)  // accumulates (+=), as every parameter gradient; from the fp32 gradient
    CUDNN_CHECK(cudnnConvolutionBackwardBias(h, &one, s.output.get(), top[0]->diff(), &one,
                                             s.bias.get(), this->params_[1]->mutable_diff()));
  const int64_t inputs = bottom[0]->count(), outputs = top[0]->count(),
                weights = this->params_[0]->count();
  const HalfOperands o =
      s.half() ? half_operands(stream, inputs, outputs, weights) : HalfOperands{};
  // The input from the copy the net kept of it, when it kept only that (the same 16 bits).
  const uint16_t* packed = s.half() ? bottom[0]->packed_values() : nullptr;
  const void* x =
      packed ? packed_operand(stream, packed, o.input, s.x_layout)
             : operand_for(s.half(), stream, bottom[0]->data(), o.input, inputs, s.x_layout);
  const void* dy = operand_for(s.half(), stream, top[0]->diff(), o.output, outputs, s.y_layout);
  void* dw = result_for(s.half(), this->params_[0]->mutable_diff(), o.weights);
  if (!s.backward_filter)
    s.backward_filter =
        cached_conv_algorithm(ConvPass::BackwardFilter, this->device().index(), s.problem, [&] {
          return find_backward_filter(s, h, this->device(), stream, x, dy, weights,
                                      cat("layer '", this->name(), "' weight gradient"));
        });
  CUDNN_CHECK(cudnnSetConvolutionMathType(s.conv.get(), s.backward_filter->math));
  // fp32 accumulates in place; a 16-bit copy is written, then added.
  CUDNN_CHECK(cudnnConvolutionBackwardFilter(
      h, &one, s.x.get(), x, s.y.get(), dy, s.conv.get(),
      cudnnConvolutionBwdFilterAlgo_t(s.backward_filter->algo),
      stream_workspace(stream, s.backward_filter->workspace), s.backward_filter->workspace,
      s.half() ? &zero : &one, s.w.get(), dw));
  land(s.half(), stream, o.weights, this->params_[0]->mutable_diff(), weights, /*accumulate=*/true,
       s.w_layout);
  if (!propagate_down[0]) return;
  // The weights' copy takes the slot the weight gradient's left (in stream order), the input
  // gradient's the input's.
  const void* w =
      operand_for(s.half(), stream, this->params_[0]->data(), o.weights, weights, s.w_layout);
  void* dx = result_for(s.half(), bottom[0]->mutable_diff(), o.input);
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
  land(s.half(), stream, o.input, bottom[0]->mutable_diff(), inputs, /*accumulate=*/false,
       s.x_layout);
}

CGDP_INSTANTIATE_CUDA_LAYER(ConvolutionLayer)

}  // namespace cgdp
