// ReLU layer (Caffe's, with leaky negative_slope).
#include "cgdp/layers/relu_layer.hpp"

#include <algorithm>

namespace cgdp {

template <typename T>
void ReLULayer<T>::reshape(const BlobVec<T>& bottom, const BlobVec<T>& top) {
  // In place, backward sees only y; with a negative slope sign(y) no longer tells sign(x).
  if (top[0] == bottom[0] && this->param_.relu_param().negative_slope() < 0)
    this->fail("cannot run in place with a negative negative_slope");
  top[0]->reshape_like(*bottom[0]);
}

template <typename T>
void ReLULayer<T>::forward_cpu(const RunContext&, const BlobVec<T>& bottom, const BlobVec<T>& top) {
  const T slope = static_cast<T>(this->param_.relu_param().negative_slope());
  const T* x = bottom[0]->data();
  T* y = top[0]->mutable_data();
  const int64_t n = bottom[0]->count();
#pragma omp parallel for schedule(static)
  // Branch-free (Caffe's form) so the loop vectorises; same values as x > 0 ? x : slope * x.
  for (int64_t i = 0; i < n; ++i) y[i] = std::max(x[i], T(0)) + slope * std::min(x[i], T(0));
}

template <typename T>
void ReLULayer<T>::backward_cpu(const RunContext&, const BlobVec<T>& top,
                                const std::vector<bool>& propagate_down, const BlobVec<T>& bottom) {
  if (!propagate_down[0]) return;
  const T slope = static_cast<T>(this->param_.relu_param().negative_slope());
  // In place, bottom data is the top data; y > 0 exactly where x > 0 for a slope >= 0.
  const T* x = bottom[0]->data();
  const T* dy = top[0]->diff();
  T* dx = bottom[0]->mutable_diff();
  const int64_t n = bottom[0]->count();
  if (const uint16_t* packed = bottom[0]->packed_values())
    return relu_backward_from_packed(packed, dy, dx, n, slope);
  // A select, not dy * mask: multiplying a denormal gradient stalls the core for ~100 cycles.
  if (slope == T(0)) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) dx[i] = x[i] > 0 ? dy[i] : T(0);
  } else {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) dx[i] = x[i] > 0 ? dy[i] : slope * dy[i];
  }
}

template class ReLULayer<float>;
template class ReLULayer<double>;

}  // namespace cgdp
