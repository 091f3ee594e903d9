// Reshape and Flatten on CUDA: one device-to-device copy each way, in stream order.
#include "cgdp/layers/reshape_layer.hpp"
#include "cuda_layer.hpp"

namespace cgdp {

template <typename T>
void ShapeOnlyLayer<T>::forward_cuda(const RunContext& ctx, const BlobVec<T>& bottom, const BlobVec<T>& top) {
  if (bottom[0]->count() == 0) return;
  CUDA_CHECK(cudaMemcpyAsync(top[0]->mutable_data(), bottom[0]->data(), bottom[0]->bytes(), cudaMemcpyDeviceToDevice,
                             native_stream(layer_stream(*this, ctx))));
}

template <typename T>
void ShapeOnlyLayer<T>::backward_cuda(const RunContext& ctx, const BlobVec<T>& top,
                                      const std::vector<bool>& propagate_down, const BlobVec<T>& bottom) {
  if (!propagate_down[0] || top[0]->count() == 0) return;
  CUDA_CHECK(cudaMemcpyAsync(bottom[0]->mutable_diff(), top[0]->diff(), top[0]->bytes(), cudaMemcpyDeviceToDevice,
                             native_stream(layer_stream(*this, ctx))));
}

CGDP_INSTANTIATE_CUDA_LAYER(ShapeOnlyLayer)

}  // namespace cgdp
