// Softmax layer: one independent softmax per (outer, inner) position, stable by max-subtraction.
#include "cgdp/layers/softmax_layer.hpp"

#include <cmath>

#include "cgdp/layers/layer_errors.hpp"

namespace cgdp {

template <typename T>
void SoftmaxLayer<T>::reshape(const BlobVec<T>& bottom, const BlobVec<T>& top) {
  const int axis = layer_axis(*this, bottom[0]->shape(), this->param_.softmax_param().axis());
  outer_ = bottom[0]->count(0, axis);
  classes_ = bottom[0]->shape(axis);
  inner_ = bottom[0]->count(axis + 1);
  top[0]->reshape_like(*bottom[0]);
}

template <typename T>
void SoftmaxLayer<T>::forward_cpu(const RunContext&, const BlobVec<T>& bottom,
                                  const BlobVec<T>& top) {
  const T* x = bottom[0]->data();
  T* y = top[0]->mutable_data();
  const int64_t classes = classes_, inner = inner_;
  // Each column reads x[c] before writing y[c], so top == bottom is fine.
#pragma omp parallel for schedule(static)
  for (int64_t col = 0; col < outer_ * inner; ++col) {
    const int64_t base = col / inner * classes * inner + col % inner;
    T peak = x[base];
    for (int64_t c = 1; c < classes; ++c) peak = std::max(peak, x[base + c * inner]);
    T sum = 0;
    for (int64_t c = 0; c < classes; ++c)
      sum += y[base + c * inner] = std::exp(x[base + c * inner] - peak);
    for (int64_t c = 0; c < classes; ++c) y[base + c * inner] /= sum;
  }
}

template <typename T>
void SoftmaxLayer<T>::backward_cpu(const RunContext&, const BlobVec<T>& top,
                                   const std::vector<bool>& propagate_down,
                                   const BlobVec<T>& bottom) {
  if (!propagate_down[0]) return;
  const T* y = top[0]->data();
  const T* dy = top[0]->diff();
  T* dx = bottom[0]->mutable_diff();
  const int64_t classes = classes_, inner = inner_;
  // dx = y * (dy - <dy, y>) per column.
#pragma omp parallel for schedule(static)
  for (int64_t col = 0; col < outer_ * inner; ++col) {
    const int64_t base = col / inner * classes * inner + col % inner;
    T dot = 0;
    for (int64_t c = 0; c < classes; ++c) dot += dy[base + c * inner] * y[base + c * inner];
    for (int64_t c = 0; c < classes; ++c)
      dx[base + c * inner] = y[base + c * inner] * (dy[base + c * inner] - dot);
  }
}

template class SoftmaxLayer<float>;
template class SoftmaxLayer<double>;

}  // namespace cgdp
