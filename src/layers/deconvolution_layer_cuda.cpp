// Deconvolution on CUDA: the convolution it transposes runs from this layer's output (cuDNN's x) to
// its input (cuDNN's y). Forward is that convolution's backward-data pass, the input gradient its
// forward pass, the weight gradient its backward-filter pass with the output's gradient as x;
// algorithms are searched once per problem as Convolution's are (cuda/conv_passes.hpp), and in
// bf16/fp16 run on 16-bit copies of their operands as Convolution's do.
#include "cgdp/layers/deconvolution_layer.hpp"
#include "cuda/conv_passes.hpp"
#include "cuda_layer.hpp"

namespace cgdp {

namespace {

template <typename T>
ConvCuda& deconv_state(DeconvolutionLayer<T>& layer, ConvCuda& s, const Blob<T>& bottom,
                       const Blob<T>& top, const ConvGeometry& g, int64_t group) {
  if (s.describes(bottom.shape())) return s;
  const Shape& in = bottom.shape();
  const Shape& out = top.shape();
  s.operands = conv_operands<T>();
  const cudnnDataType_t type = conv_operand_type<T>(s.operands);
  set_tensor(layer, s.x, out[0], out[1], out[2], out[3], type);
  set_tensor(layer, s.y, in[0], in[1], in[2], in[3], type);
  set_tensor(layer, s.output, out[0], out[1], out[2], out[3]);
  set_tensor(layer, s.bias, 1, out[1], 1, 1);
  auto i = [&layer](int64_t v) { return as_int(layer, v, "deconvolution setting"); };
  // The weights [C_in, num_output / group, kh, kw] are the transposed convolution's filter:
  // C_in outputs from num_output / group inputs per group.
  CUDNN_CHECK(cudnnSetFilter4dDescriptor(s.w.get(), type, CUDNN_TENSOR_NCHW, i(in[1]),
                                         i(out[1] / group), i(g.kernel_h), i(g.kernel_w)));
  CUDNN_CHECK(cudnnSetConvolution2dDescriptor(s.conv.get(), i(g.pad_h), i(g.pad_w), i(g.stride_h),
                                              i(g.stride_w), i(g.dilation_h), i(g.dilation_w),
                                              CUDNN_CROSS_CORRELATION, cudnn_data_type<T>()));
  CUDNN_CHECK(cudnnSetConvolutionGroupCount(s.conv.get(), i(group)));
  described(s, in, layer.cudnn_problem(in, out));
  return s;
}

}  // namespace

template <typename T>
void DeconvolutionLayer<T>::forward_cuda(const RunContext& ctx, const BlobVec<T>& bottom,
                                         const BlobVec<T>& top) {
  Stream& stream = layer_stream(*this, ctx);
  auto& s = deconv_state(*this, this->template backend_state<ConvCuda>(), *bottom[0], *top[0],
                         output_geometry_, group_);
  const cudnnHandle_t h = cudnn_handle(stream);
  const int64_t inputs = bottom[0]->count(), outputs = top[0]->count(),
                weights = this->params_[0]->count();
  const HalfOperands o =
      s.half() ? half_operands(stream, inputs, outputs, weights) : HalfOperands{};
  const void* x = operand_for(s.half(), stream, bottom[0]->data(), o.input, inputs);
  const void* w = operand_for(s.half(), stream, this->params_[0]->data(), o.weights, weights);
  void* y = result_for(s.half(), top[0]->mutable_data(), o.output);
  if (!s.backward_data)
    s.backward_data =
        cached_conv_algorithm(ConvPass::BackwardData, this->device().index(), s.problem, [&] {
          return find_backward_data(s, h, stream, w, x, y,
                                    cat("layer '", this->name(), "' forward"));
        });
  CUDNN_CHECK(cudnnSetConvolutionMathType(s.conv.get(), s.backward_data->math));
  const T one = 1, zero = 0;
  CUDNN_CHECK(cudnnConvolutionBackwardData(h, &one, s.w.get(), w, s.y.get(), x, s.conv.get(),
                                           cudnnConvolutionBwdDataAlgo_t(s.backward_data->algo),
                                           stream_workspace(stream, s.backward_data->workspace),
                                           s.backward_data->workspace, &zero, s.x.get(), y));
  // In 16 bits the bias joins the result as it is widened: one pass over the output, not two.
  const Shape& out = top[0]->shape();
  const HalfLayout nchw{false, out[0], out[1], out[2] * out[3]};
  const T* bias = bias_term_ ? this->params_[1]->data() : nullptr;
  const bool landed =
      land_forward(s.half(), stream, o.output, top[0]->mutable_data(), nchw, bias, false);
  if (bias && !landed)
    CUDNN_CHECK(
        cudnnAddTensor(h, &one, s.bias.get(), bias, &one, s.output.get(), top[0]->mutable_data()));
}

template <typename T>
void DeconvolutionLayer<T>::backward_cuda(const RunContext& ctx, const BlobVec<T>& top,
                                          const std::vector<bool>& propagate_down,
                                          const BlobVec<T>& bottom) {
  Stream& stream = layer_stream(*this, ctx);
  auto& s = deconv_state(*this, this->template backend_state<ConvCuda>(), *bottom[0], *top[0],
                         output_geometry_, group_);
  const cudnnHandle_t h = cudnn_handle(stream);
  const T one = 1, zero = 0;
  if (bias_term_)  // accumulates (+=), as every parameter gradient; from the fp32 gradient
    CUDNN_CHECK(cudnnConvolutionBackwardBias(h, &one, s.output.get(), top[0]->diff(), &one,
                                             s.bias.get(), this->params_[1]->mutable_diff()));
  const int64_t inputs = bottom[0]->count(), outputs = top[0]->count(),
                weights = this->params_[0]->count();
  const HalfOperands o =
      s.half() ? half_operands(stream, inputs, outputs, weights) : HalfOperands{};
  const void* x = operand_for(s.half(), stream, bottom[0]->data(), o.input, inputs);
  const void* dy = operand_for(s.half(), stream, top[0]->diff(), o.output, outputs);
  void* dw = result_for(s.half(), this->params_[0]->mutable_diff(), o.weights);
  if (!s.backward_filter)
    s.backward_filter =
        cached_conv_algorithm(ConvPass::BackwardFilter, this->device().index(), s.problem, [&] {
          return find_backward_filter(s, h, this->device(), stream, dy, x, weights,
                                      cat("layer '", this->name(), "' weight gradient"));
        });
  CUDNN_CHECK(cudnnSetConvolutionMathType(s.conv.get(), s.backward_filter->math));
  // fp32 accumulates in place; a 16-bit copy is written, then added.
  CUDNN_CHECK(cudnnConvolutionBackwardFilter(
      h, &one, s.x.get(), dy, s.y.get(), x, s.conv.get(),
      cudnnConvolutionBwdFilterAlgo_t(s.backward_filter->algo),
      stream_workspace(stream, s.backward_filter->workspace), s.backward_filter->workspace,
      s.half() ? &zero : &one, s.w.get(), dw));
  land(s.half(), stream, o.weights, this->params_[0]->mutable_diff(), weights, /*accumulate=*/true);
  if (!propagate_down[0]) return;
  // The weights' copy takes the slot the weight gradient's left, the input gradient's the input's.
  const void* w = operand_for(s.half(), stream, this->params_[0]->data(), o.weights, weights);
  void* dx = result_for(s.half(), bottom[0]->mutable_diff(), o.input);
  if (!s.forward)
    s.forward = cached_conv_algorithm(ConvPass::Forward, this->device().index(), s.problem, [&] {
      return find_forward(s, h, stream, dy, w, dx,
                          cat("layer '", this->name(), "' input gradient"));
    });
  CUDNN_CHECK(cudnnSetConvolutionMathType(s.conv.get(), s.forward->math));
  CUDNN_CHECK(cudnnConvolutionForward(h, &one, s.x.get(), dy, s.w.get(), w, s.conv.get(),
                                      cudnnConvolutionFwdAlgo_t(s.forward->algo),
                                      stream_workspace(stream, s.forward->workspace),
                                      s.forward->workspace, &zero, s.y.get(), dx));
  land(s.half(), stream, o.input, bottom[0]->mutable_diff(), inputs, /*accumulate=*/false);
}

CGDP_INSTANTIATE_CUDA_LAYER(DeconvolutionLayer)

}  // namespace cgdp
