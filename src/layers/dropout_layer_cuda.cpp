// Dropout on CUDA: the mask from the same counters as the CPU layer (kernels/dropout.cu), so the
// masks are identical across backends.
#include "cgdp/core/counter_rng.hpp"
#include "cgdp/layers/dropout_layer.hpp"
#include "cuda_layer.hpp"
#include "dropout.cuh"

namespace cgdp {

template <typename T>
void DropoutLayer<T>::forward_cuda(const RunContext& ctx, const BlobVec<T>& bottom,
                                   const BlobVec<T>& top) {
  Stream& stream = layer_stream(*this, ctx);
  const T* x = bottom[0]->data();
  T* y = top[0]->mutable_data();
  train_ = ctx.phase == Phase::Train;
  if (!train_) {
    if (x != y) stream.copy_async(y, x, bottom[0]->bytes());
    return;
  }
  const double p = this->param_.dropout_param().dropout_ratio();
  const CounterRng step({ctx.seed, name_hash_, static_cast<uint64_t>(ctx.iteration)});
  kernels::dropout_forward(x, y, mask_.mutable_data(), bottom[0]->shape(0), bottom[0]->count(1),
                           step.key(), ctx.sample_offset, p, static_cast<T>(1.0 / (1.0 - p)),
                           native_stream(stream));
}

template <typename T>
void DropoutLayer<T>::backward_cuda(const RunContext& ctx, const BlobVec<T>& top,
                                    const std::vector<bool>& propagate_down,
                                    const BlobVec<T>& bottom) {
  if (!propagate_down[0]) return;
  Stream& stream = layer_stream(*this, ctx);
  const T* dy = top[0]->diff();
  T* dx = bottom[0]->mutable_diff();
  if (!train_) {
    if (dx != dy) stream.copy_async(dx, dy, bottom[0]->bytes());
    return;
  }
  kernels::dropout_backward(dy, mask_.data(), dx, bottom[0]->count(), native_stream(stream));
}

CGDP_INSTANTIATE_CUDA_LAYER(DropoutLayer)

}  // namespace cgdp
