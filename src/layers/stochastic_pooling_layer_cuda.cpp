// Stochastic pooling on CUDA: kernels/stochastic_pooling.cu.
#include "cgdp/core/counter_rng.hpp"
#include "cgdp/layers/stochastic_pooling_layer.hpp"
#include "cuda_layer.hpp"
#include "stochastic_pooling.cuh"

namespace cgdp {

namespace {

template <typename G>
kernels::StochasticPoolGeometry to_kernel(const G& g, int64_t channels) {
  return {g.planes, channels, g.height, g.width, g.pooled_h, g.pooled_w, g.kernel_h, g.kernel_w, g.stride_h, g.stride_w};
}

}  // namespace

template <typename T>
void StochasticPoolingLayer<T>::forward_cuda(const RunContext& ctx, const BlobVec<T>& bottom, const BlobVec<T>& top) {
  const CounterRng step({ctx.seed, name_hash_, static_cast<uint64_t>(ctx.iteration)});
  kernels::stochastic_pool_forward(bottom[0]->data(), to_kernel(g_, channels_), ctx.phase == Phase::Train, step.key(),
                                   ctx.sample_offset, top[0]->mutable_data(), chosen_.mutable_data(),
                                   native_stream(layer_stream(*this, ctx)));
}

template <typename T>
void StochasticPoolingLayer<T>::backward_cuda(const RunContext& ctx, const BlobVec<T>& top,
                                              const std::vector<bool>& propagate_down, const BlobVec<T>& bottom) {
  if (!propagate_down[0]) return;
  kernels::stochastic_pool_backward(bottom[0]->data(), top[0]->data(), top[0]->diff(), chosen_.data(),
                                    to_kernel(g_, channels_), ctx.phase == Phase::Train, bottom[0]->mutable_diff(),
                                    native_stream(layer_stream(*this, ctx)));
}

CGDP_INSTANTIATE_CUDA_LAYER(StochasticPoolingLayer)

}  // namespace cgdp
