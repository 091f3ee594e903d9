// Split on CUDA: shared values (or device copies) forward; backward sums the tops' gradients in order with the
// fixed-order sum kernel (kernels/sum.cu), the CPU layer's additions.
#include "cgdp/layers/split_layer.hpp"
#include "cuda_layer.hpp"
#include "sum.cuh"

namespace cgdp {

template <typename T>
void SplitLayer<T>::forward_cuda(const RunContext& ctx, const BlobVec<T>& bottom,
                                 const BlobVec<T>& top) {
  if (shares_) return;
  Stream& stream = layer_stream(*this, ctx);
  for (Blob<T>* t : top)
    if (t != bottom[0] && bottom[0]->count() > 0)
      stream.copy_async(t->mutable_data(), bottom[0]->data(), bottom[0]->bytes());
}

template <typename T>
void SplitLayer<T>::backward_cuda(const RunContext& ctx, const BlobVec<T>& top,
                                  const std::vector<bool>& propagate_down,
                                  const BlobVec<T>& bottom) {
  if (!propagate_down[0]) return;
  Stream& stream = layer_stream(*this, ctx);
  std::vector<const T*> diffs;
  for (const Blob<T>* t : top) diffs.push_back(t->diff());
  kernels::sum_buffers(bottom[0]->mutable_diff(), diffs.data(), static_cast<int>(diffs.size()),
                       bottom[0]->count(), native_stream(stream));
}

CGDP_INSTANTIATE_CUDA_LAYER(SplitLayer)

}  // namespace cgdp
