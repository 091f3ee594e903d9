// Crop on the CPU: each top element from its place in bottom 0, shifted by the offsets.
#include "cgdp/layers/crop_layer.hpp"

#include <algorithm>

#include "cgdp/layers/layer_errors.hpp"

namespace cgdp {

template <typename T>
void CropLayer<T>::reshape(const BlobVec<T>& bottom, const BlobVec<T>& top) {
  const Shape& in = bottom[0]->shape();
  const Shape& like = bottom[1]->shape();
  if (in.size() != like.size())
    this->fail(cat("bottoms of ", in.size(), " and ", like.size(), " axes; the reference must have as many"));
  const auto& p = this->param_.crop_param();
  const int axis = layer_axis(*this, in, p.axis());
  const int cropped = static_cast<int>(in.size()) - axis;
  if (p.offset_size() > 1 && p.offset_size() != cropped)
    this->fail(cat(p.offset_size(), " offsets for ", cropped, " cropped axes; give one, or one per axis"));
  offsets_.assign(in.size(), 0);
  Shape shape = in;
  for (int a = axis; a < static_cast<int>(in.size()); ++a) {
    const int64_t offset = p.offset_size() == 0 ? 0 : p.offset(p.offset_size() == 1 ? 0 : a - axis);
    if (offset + like[a] > in[a])
      this->fail(cat("axis ", a, ": offset ", offset, " + size ", like[a], " exceeds bottom 0's ", in[a]));
    offsets_[a] = offset;
    shape[a] = like[a];
  }
  if (top[0] == bottom[0]) this->fail("cannot run in place");
  top[0]->reshape(shape);
}

template <typename T>
int64_t CropLayer<T>::source_index(int64_t i, const Shape& top, const Shape& in) const {
  int64_t index = 0, stride = 1;
  for (int a = static_cast<int>(top.size()) - 1; a >= 0; --a) {
    index += (i % top[a] + offsets_[a]) * stride;
    i /= top[a];
    stride *= in[a];
  }
  return index;
}

template <typename T>
void CropLayer<T>::forward_cpu(const RunContext&, const BlobVec<T>& bottom, const BlobVec<T>& top) {
  const T* x = bottom[0]->data();
  T* y = top[0]->mutable_data();
  const Shape& out = top[0]->shape();
  const Shape& in = bottom[0]->shape();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < top[0]->count(); ++i) y[i] = x[source_index(i, out, in)];
}

template <typename T>
void CropLayer<T>::backward_cpu(const RunContext&, const BlobVec<T>& top, const std::vector<bool>& propagate_down,
                                const BlobVec<T>& bottom) {
  if (!propagate_down[0]) return;
  T* dx = bottom[0]->mutable_diff();
  std::fill_n(dx, bottom[0]->count(), T(0));
  const T* dy = top[0]->diff();
  const Shape& out = top[0]->shape();
  const Shape& in = bottom[0]->shape();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < top[0]->count(); ++i) dx[source_index(i, out, in)] = dy[i];
}

template class CropLayer<float>;
template class CropLayer<double>;

}  // namespace cgdp
