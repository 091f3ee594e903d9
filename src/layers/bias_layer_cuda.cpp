// Bias on CUDA: Scale's kernels (kernels/scale.cu) with a scale of ones, which add exactly the bias
// (x * 1 + b) and sum its gradient the same way; the scale's own gradient goes to a scratch blob.
#include "cgdp/layers/bias_layer.hpp"
#include "cuda_layer.hpp"
#include "scale.cuh"

namespace cgdp {

namespace {

template <typename T>
struct BiasCuda final : LayerBackendState {
  DeviceBuffer ones, scale_diff;
  int64_t dim = 0;
};

template <typename T>
BiasCuda<T>& state_for(Layer<T>& layer, BiasCuda<T>& s, Stream& stream, int64_t dim) {
  if (s.dim != dim) {
    s.ones = DeviceBuffer(layer.device(), static_cast<size_t>(dim) * sizeof(T));
    s.scale_diff = DeviceBuffer(layer.device(), static_cast<size_t>(dim) * sizeof(T));
    const std::vector<T> ones(static_cast<size_t>(dim), T(1));
    stream.copy_async(s.ones.get(), ones.data(), ones.size() * sizeof(T));
    stream.synchronize();  // `ones` is on this stack
    s.dim = dim;
  }
  return s;
}

}  // namespace

template <typename T>
void BiasLayer<T>::forward_cuda(const RunContext& ctx, const BlobVec<T>& bottom, const BlobVec<T>& top) {
  Stream& stream = layer_stream(*this, ctx);
  auto& s = state_for(*this, this->template backend_state<BiasCuda<T>>(), stream, dim_);
  kernels::scale_forward(bottom[0]->data(), static_cast<const T*>(s.ones.get()), this->params_[0]->data(),
                         {outer_, dim_, inner_}, top[0]->mutable_data(), native_stream(stream));
}

template <typename T>
void BiasLayer<T>::backward_cuda(const RunContext& ctx, const BlobVec<T>& top, const std::vector<bool>& propagate_down,
                                 const BlobVec<T>& bottom) {
  Stream& stream = layer_stream(*this, ctx);
  auto& s = state_for(*this, this->template backend_state<BiasCuda<T>>(), stream, dim_);
  const kernels::ScaleShape shape{outer_, dim_, inner_};
  kernels::scale_backward(
      top[0]->diff(), top[0]->diff(), static_cast<const T*>(s.ones.get()), shape,
      static_cast<T*>(s.scale_diff.get()), this->params_[0]->mutable_diff(),
      propagate_down[0] ? bottom[0]->mutable_diff() : nullptr,
      stream_workspace(stream, kernels::scale_scratch_bytes(shape)), native_stream(stream));
}

CGDP_INSTANTIATE_CUDA_LAYER(BiasLayer)

}  // namespace cgdp
