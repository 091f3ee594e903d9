// Concat on CUDA: each bottom is a strided slab of the top, moved by one 2-D device copy
// (outer rows of slab elements, at the top's row pitch).
#include "cgdp/layers/concat_layer.hpp"
#include "cuda_layer.hpp"

namespace cgdp {

template <typename T>
void ConcatLayer<T>::forward_cuda(const RunContext& ctx, const BlobVec<T>& bottom,
                                  const BlobVec<T>& top) {
  Stream& stream = layer_stream(*this, ctx);
  const int64_t top_slab = top[0]->shape(axis_) * inner_;
  int64_t offset = 0;
  for (Blob<T>* b : bottom) {
    const int64_t slab = b->shape(axis_) * inner_;
    copy_rows(stream, top[0]->mutable_data() + offset, top_slab, b->data(), slab, slab, outer_);
    offset += slab;
  }
}

template <typename T>
void ConcatLayer<T>::backward_cuda(const RunContext& ctx, const BlobVec<T>& top,
                                   const std::vector<bool>& propagate_down,
                                   const BlobVec<T>& bottom) {
  Stream& stream = layer_stream(*this, ctx);
  const int64_t top_slab = top[0]->shape(axis_) * inner_;
  int64_t offset = 0;
  for (size_t i = 0; i < bottom.size(); ++i) {
    const int64_t slab = bottom[i]->shape(axis_) * inner_;
    if (propagate_down[i])
      copy_rows(stream, bottom[i]->mutable_diff(), slab, top[0]->diff() + offset, top_slab, slab,
                outer_);
    offset += slab;
  }
}

CGDP_INSTANTIATE_CUDA_LAYER(ConcatLayer)

}  // namespace cgdp
