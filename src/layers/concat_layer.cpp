// Concat layer: each bottom is a slab of the top along the concat axis.
#include "cgdp/layers/concat_layer.hpp"

#include <algorithm>

#include "cgdp/layers/layer_errors.hpp"

namespace cgdp {

template <typename T>
void ConcatLayer<T>::reshape(const BlobVec<T>& bottom, const BlobVec<T>& top) {
  const Shape& first = bottom[0]->shape();
  axis_ = layer_axis(*this, first, this->param_.concat_param().axis());
  Shape shape = first;
  for (size_t b = 1; b < bottom.size(); ++b) {
    const Shape& other = bottom[b]->shape();
    bool match = other.size() == first.size();
    for (size_t a = 0; match && a < first.size(); ++a)
      match = static_cast<int>(a) == axis_ || other[a] == first[a];
    if (!match)
      this->fail(cat("bottom ", b, " has shape ", shape_string(other), " but bottom 0 has shape ",
                     shape_string(first), "; all axes but the concat axis ", axis_, " must match"));
    shape[axis_] += other[axis_];
  }
  channels_.clear();
  for (const Blob<T>* b : bottom) channels_.push_back(b->shape(axis_));
  outer_ = bottom[0]->count(0, axis_);
  inner_ = bottom[0]->count(axis_ + 1);
  top[0]->reshape(shape);
}

template <typename T>
void ConcatLayer<T>::forward_cpu(const RunContext&, const BlobVec<T>& bottom,
                                 const BlobVec<T>& top) {
  const int64_t top_slab = top[0]->shape(axis_) * inner_;
  int64_t offset = 0;
  for (Blob<T>* b : bottom) {
    const int64_t slab = b->shape(axis_) * inner_;
    const T* x = b->data();
    T* y = top[0]->mutable_data() + offset;
#pragma omp parallel for schedule(static)
    for (int64_t o = 0; o < outer_; ++o)
      std::copy(x + o * slab, x + (o + 1) * slab, y + o * top_slab);
    offset += slab;
  }
}

template <typename T>
void ConcatLayer<T>::backward_cpu(const RunContext&, const BlobVec<T>& top,
                                  const std::vector<bool>& propagate_down,
                                  const BlobVec<T>& bottom) {
  const int64_t top_slab = top[0]->shape(axis_) * inner_;
  int64_t offset = 0;
  for (size_t i = 0; i < bottom.size(); ++i) {
    const int64_t slab = bottom[i]->shape(axis_) * inner_;
    if (propagate_down[i]) {
      const T* dy = top[0]->diff() + offset;
      T* dx = bottom[i]->mutable_diff();
#pragma omp parallel for schedule(static)
      for (int64_t o = 0; o < outer_; ++o)
        std::copy(dy + o * top_slab, dy + o * top_slab + slab, dx + o * slab);
    }
    offset += slab;
  }
}

template class ConcatLayer<float>;
template class ConcatLayer<double>;

}  // namespace cgdp
