// Softmax on CUDA: cuDNN's accurate (max-subtracting) softmax over the channel axis of the blob
// viewed as outer x classes x inner x 1.
#include "cgdp/layers/softmax_layer.hpp"
#include "cuda_layer.hpp"

namespace cgdp {

namespace {

struct SoftmaxCuda final : LayerBackendState {
  TensorDescriptor tensor;
  int64_t outer = -1, classes = -1, inner = -1;  // what `tensor` describes
};

template <typename T>
cudnnTensorDescriptor_t describe(const Layer<T>& layer, SoftmaxCuda& s, int64_t outer,
                                 int64_t classes, int64_t inner) {
  if (s.outer != outer || s.classes != classes || s.inner != inner) {
    set_tensor(layer, s.tensor, outer, classes, inner, 1);
    s.outer = outer, s.classes = classes, s.inner = inner;
  }
  return s.tensor.get();
}

}  // namespace

template <typename T>
void SoftmaxLayer<T>::forward_cuda(const RunContext& ctx, const BlobVec<T>& bottom,
                                   const BlobVec<T>& top) {
  Stream& stream = layer_stream(*this, ctx);
  if (bottom[0]->count() == 0) return;
  auto& s = this->template backend_state<SoftmaxCuda>();
  const cudnnTensorDescriptor_t desc = describe(*this, s, outer_, classes_, inner_);
  const T one = 1, zero = 0;
  CUDNN_CHECK(cudnnSoftmaxForward(cudnn_handle(stream), CUDNN_SOFTMAX_ACCURATE,
                                  CUDNN_SOFTMAX_MODE_CHANNEL, &one, desc, bottom[0]->data(), &zero,
                                  desc, top[0]->mutable_data()));
}

template <typename T>
void SoftmaxLayer<T>::backward_cuda(const RunContext& ctx, const BlobVec<T>& top,
                                    const std::vector<bool>& propagate_down,
                                    const BlobVec<T>& bottom) {
  if (!propagate_down[0] || bottom[0]->count() == 0) return;
  Stream& stream = layer_stream(*this, ctx);
  auto& s = this->template backend_state<SoftmaxCuda>();
  const cudnnTensorDescriptor_t desc = describe(*this, s, outer_, classes_, inner_);
  const T one = 1, zero = 0;
  CUDNN_CHECK(cudnnSoftmaxBackward(cudnn_handle(stream), CUDNN_SOFTMAX_ACCURATE,
                                   CUDNN_SOFTMAX_MODE_CHANNEL, &one, desc, top[0]->data(), desc,
                                   top[0]->diff(), &zero, desc, bottom[0]->mutable_diff()));
}

CGDP_INSTANTIATE_CUDA_LAYER(SoftmaxLayer)

}  // namespace cgdp
