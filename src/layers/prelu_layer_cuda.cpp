// PReLU on CUDA: kernels/prelu.cu; in place, the input is kept in bottom_copy_ as on the CPU.
#include "cgdp/layers/prelu_layer.hpp"
#include "cuda_layer.hpp"
#include "prelu.cuh"

namespace cgdp {

template <typename T>
void PReLULayer<T>::forward_cuda(const RunContext& ctx, const BlobVec<T>& bottom, const BlobVec<T>& top) {
  Stream& stream = layer_stream(*this, ctx);
  if (top[0] == bottom[0] && !this->forward_only_ && bottom[0]->count() > 0)
    stream.copy_async(bottom_copy_.mutable_data(), bottom[0]->data(), bottom[0]->bytes());
  kernels::prelu_forward(bottom[0]->data(), this->params_[0]->data(), {outer_, channels_, inner_, shared_},
                         top[0]->mutable_data(), native_stream(stream));
}

template <typename T>
void PReLULayer<T>::backward_cuda(const RunContext& ctx, const BlobVec<T>& top, const std::vector<bool>& propagate_down,
                                  const BlobVec<T>& bottom) {
  const T* x = top[0] == bottom[0] ? bottom_copy_.data() : bottom[0]->data();
  kernels::prelu_backward(x, top[0]->diff(), this->params_[0]->data(), {outer_, channels_, inner_, shared_},
                          this->params_[0]->mutable_diff(), propagate_down[0] ? bottom[0]->mutable_diff() : nullptr,
                          native_stream(layer_stream(*this, ctx)));
}

CGDP_INSTANTIATE_CUDA_LAYER(PReLULayer)

}  // namespace cgdp
