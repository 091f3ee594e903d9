// ReLU on CUDA: cuDNN's activation for plain ReLU (NaN propagated, as std::max does on the CPU),
// the leaky kernel (kernels/relu.cu) when negative_slope != 0, which cuDNN has no mode for.
#include "cgdp/layers/relu_layer.hpp"
#include "cuda_layer.hpp"
#include "relu.cuh"

namespace cgdp {

namespace {

struct ReLUCuda final : LayerBackendState {
  ReLUCuda() {
    CUDNN_CHECK(cudnnSetActivationDescriptor(relu.get(), CUDNN_ACTIVATION_RELU,
                                             CUDNN_PROPAGATE_NAN, 0.0));
  }
  ActivationDescriptor relu;
  TensorDescriptor tensor;  // the blob as one flat row
  int64_t count = -1;
};

template <typename T>
void describe(const Layer<T>& layer, ReLUCuda& s, int64_t count) {
  if (s.count == count) return;
  set_tensor(layer, s.tensor, 1, count, 1, 1);
  s.count = count;
}

}  // namespace

template <typename T>
void ReLULayer<T>::forward_cuda(const RunContext& ctx, const BlobVec<T>& bottom,
                                const BlobVec<T>& top) {
  Stream& stream = layer_stream(*this, ctx);
  const T slope = static_cast<T>(this->param_.relu_param().negative_slope());
  const int64_t n = bottom[0]->count();
  if (n == 0) return;
  if (slope != 0) {
    kernels::relu_forward(bottom[0]->data(), top[0]->mutable_data(), n, slope, native_stream(stream));
    return;
  }
  auto& s = this->template backend_state<ReLUCuda>();
  describe(*this, s, n);
  const T one = 1, zero = 0;
  CUDNN_CHECK(cudnnActivationForward(cudnn_handle(stream), s.relu.get(), &one, s.tensor.get(),
                                     bottom[0]->data(), &zero, s.tensor.get(),
                                     top[0]->mutable_data()));
}

template <typename T>
void ReLULayer<T>::backward_cuda(const RunContext& ctx, const BlobVec<T>& top,
                                 const std::vector<bool>& propagate_down, const BlobVec<T>& bottom) {
  if (!propagate_down[0]) return;
  Stream& stream = layer_stream(*this, ctx);
  const T slope = static_cast<T>(this->param_.relu_param().negative_slope());
  const int64_t n = bottom[0]->count();
  if (n == 0) return;
  if (const uint16_t* packed = bottom[0]->packed_values()) {
    kernels::relu_backward_packed(packed, infinity_bits(layer_precision()), top[0]->diff(),
                                  bottom[0]->mutable_diff(), n, slope, native_stream(stream));
    return;
  }
  if (slope != 0) {
    kernels::relu_backward(bottom[0]->data(), top[0]->diff(), bottom[0]->mutable_diff(), n, slope,
                           native_stream(stream));
    return;
  }
  auto& s = this->template backend_state<ReLUCuda>();
  describe(*this, s, n);
  const T one = 1, zero = 0;
  CUDNN_CHECK(cudnnActivationBackward(cudnn_handle(stream), s.relu.get(), &one, s.tensor.get(),
                                      top[0]->data(), s.tensor.get(), top[0]->diff(),
                                      s.tensor.get(), bottom[0]->data(), &zero, s.tensor.get(),
                                      bottom[0]->mutable_diff()));
}

CGDP_INSTANTIATE_CUDA_LAYER(ReLULayer)

}  // namespace cgdp
