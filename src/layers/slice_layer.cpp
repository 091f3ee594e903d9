// Slice on the CPU: each top is a slab of the bottom along the slice axis.
#include "cgdp/layers/slice_layer.hpp"

#include <algorithm>

#include "cgdp/layers/layer_errors.hpp"

namespace cgdp {

template <typename T>
void SliceLayer<T>::reshape(const BlobVec<T>& bottom, const BlobVec<T>& top) {
  const Shape& in = bottom[0]->shape();
  const auto& p = this->param_.slice_param();
  axis_ = layer_axis(*this, in, p.axis());
  const int64_t extent = in[axis_];
  const int64_t tops = static_cast<int64_t>(top.size());
  std::vector<int64_t> sizes;
  if (p.slice_point_size() > 0) {
    if (p.slice_point_size() != tops - 1)
      this->fail(cat(p.slice_point_size(), " slice_point(s) for ", tops, " tops; give one fewer than the tops"));
    int64_t previous = 0;
    for (const uint32_t point : p.slice_point()) {
      if (point <= previous || point >= extent)
        this->fail(cat("slice_point ", point, " must be increasing and inside (0, ", extent, ") on axis ", axis_));
      sizes.push_back(point - previous);
      previous = point;
    }
    sizes.push_back(extent - previous);
  } else {
    if (extent % tops != 0)
      this->fail(cat("axis ", axis_, " of size ", extent, " does not split evenly into ", tops, " tops; give slice_point"));
    sizes.assign(static_cast<size_t>(tops), extent / tops);
  }
  outer_ = bottom[0]->count(0, axis_);
  inner_ = bottom[0]->count(axis_ + 1);
  for (int64_t t = 0; t < tops; ++t) {
    if (top[t] == bottom[0]) this->fail("cannot run in place");
    Shape shape = in;
    shape[axis_] = sizes[t];
    top[t]->reshape(shape);
  }
}

template <typename T>
void SliceLayer<T>::forward_cpu(const RunContext&, const BlobVec<T>& bottom, const BlobVec<T>& top) {
  const int64_t bottom_slab = bottom[0]->shape(axis_) * inner_;
  int64_t offset = 0;
  for (Blob<T>* t : top) {
    const int64_t slab = t->shape(axis_) * inner_;
    const T* x = bottom[0]->data() + offset;
    T* y = t->mutable_data();
#pragma omp parallel for schedule(static)
    for (int64_t o = 0; o < outer_; ++o) std::copy(x + o * bottom_slab, x + o * bottom_slab + slab, y + o * slab);
    offset += slab;
  }
}

template <typename T>
void SliceLayer<T>::backward_cpu(const RunContext&, const BlobVec<T>& top, const std::vector<bool>& propagate_down,
                                 const BlobVec<T>& bottom) {
  if (!propagate_down[0]) return;
  const int64_t bottom_slab = bottom[0]->shape(axis_) * inner_;
  int64_t offset = 0;
  for (Blob<T>* t : top) {
    const int64_t slab = t->shape(axis_) * inner_;
    const T* dy = t->diff();
    T* dx = bottom[0]->mutable_diff() + offset;
#pragma omp parallel for schedule(static)
    for (int64_t o = 0; o < outer_; ++o) std::copy(dy + o * slab, dy + (o + 1) * slab, dx + o * bottom_slab);
    offset += slab;
  }
}

template class SliceLayer<float>;
template class SliceLayer<double>;

}  // namespace cgdp
