// Slice on CUDA: each top is a strided slab of the bottom, moved by one 2-D device copy.
#include "cgdp/layers/slice_layer.hpp"
#include "cuda_layer.hpp"

namespace cgdp {

template <typename T>
void SliceLayer<T>::forward_cuda(const RunContext& ctx, const BlobVec<T>& bottom, const BlobVec<T>& top) {
  Stream& stream = layer_stream(*this, ctx);
  const int64_t bottom_slab = bottom[0]->shape(axis_) * inner_;
  int64_t offset = 0;
  for (Blob<T>* t : top) {
    const int64_t slab = t->shape(axis_) * inner_;
    copy_rows(stream, t->mutable_data(), slab, bottom[0]->data() + offset, bottom_slab, slab, outer_);
    offset += slab;
  }
}

template <typename T>
void SliceLayer<T>::backward_cuda(const RunContext& ctx, const BlobVec<T>& top, const std::vector<bool>& propagate_down,
                                  const BlobVec<T>& bottom) {
  if (!propagate_down[0]) return;
  Stream& stream = layer_stream(*this, ctx);
  const int64_t bottom_slab = bottom[0]->shape(axis_) * inner_;
  int64_t offset = 0;
  for (Blob<T>* t : top) {
    const int64_t slab = t->shape(axis_) * inner_;
    copy_rows(stream, bottom[0]->mutable_diff() + offset, bottom_slab, t->diff(), slab, slab, outer_);
    offset += slab;
  }
}

CGDP_INSTANTIATE_CUDA_LAYER(SliceLayer)

}  // namespace cgdp
