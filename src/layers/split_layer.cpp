// Split layer: fan-out by sharing (or copying) the values, fan-in of gradients by sum.
#include "cgdp/layers/split_layer.hpp"

#include <algorithm>
#include <vector>

namespace cgdp {

template <typename T>
void SplitLayer<T>::reshape(const BlobVec<T>& bottom, const BlobVec<T>& top) {
  for (Blob<T>* t : top)
    if (t != bottom[0]) shares_ ? t->alias_data(*bottom[0]) : t->reshape_like(*bottom[0]);
}

template <typename T>
void SplitLayer<T>::forward_cpu(const RunContext&, const BlobVec<T>& bottom,
                                const BlobVec<T>& top) {
  if (shares_) return;
  const T* x = bottom[0]->data();
  const int64_t n = bottom[0]->count();
  for (Blob<T>* t : top)
    if (t != bottom[0]) std::copy(x, x + n, t->mutable_data());
}

template <typename T>
void SplitLayer<T>::backward_cpu(const RunContext&, const BlobVec<T>& top,
                                 const std::vector<bool>& propagate_down,
                                 const BlobVec<T>& bottom) {
  if (!propagate_down[0]) return;
  T* dx = bottom[0]->mutable_diff();
  const int64_t n = bottom[0]->count();
  std::vector<const T*> dy(top.size());
  for (size_t t = 0; t < top.size(); ++t) dy[t] = top[t]->diff();
  if (dy.size() == 2) {  // the common fork: a loop that vectorises
    const T *dy0 = dy[0], *dy1 = dy[1];
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) dx[i] = dy0[i] + dy1[i];
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    T sum = dy[0][i];
    for (size_t t = 1; t < dy.size(); ++t) sum += dy[t][i];
    dx[i] = sum;
  }
}

template class SplitLayer<float>;
template class SplitLayer<double>;

}  // namespace cgdp
