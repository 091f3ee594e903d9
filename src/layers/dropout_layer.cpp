// Dropout layer with a counter-based mask (see counter_rng.hpp).
#include "cgdp/layers/dropout_layer.hpp"

#include <algorithm>

#include "cgdp/core/counter_rng.hpp"

namespace cgdp {

template <typename T>
DropoutLayer<T>::DropoutLayer(const proto::LayerParameter& param, Device& device)
    : Layer<T>(param, device), name_hash_(hash_name(param.name())), mask_(device, Shape{}, Diff::None) {}

template <typename T>
void DropoutLayer<T>::layer_setup(const BlobVec<T>&, const BlobVec<T>&, Rng&) {
  const float p = this->param_.dropout_param().dropout_ratio();
  if (!(p >= 0.f && p < 1.f)) this->fail(cat("dropout_ratio must be in [0, 1), got ", p));
}

template <typename T>
void DropoutLayer<T>::reshape(const BlobVec<T>& bottom, const BlobVec<T>& top) {
  if (bottom[0]->num_axes() < 1) this->fail("needs a bottom with a batch axis, got a scalar");
  top[0]->reshape_like(*bottom[0]);
  mask_.reshape_like(*bottom[0]);
}

template <typename T>
void DropoutLayer<T>::draw_mask(const RunContext& ctx, int64_t samples, int64_t per_sample) {
  const double p = this->param_.dropout_param().dropout_ratio();
  const T scale = static_cast<T>(1.0 / (1.0 - p));
  const CounterRng step({ctx.seed, name_hash_, static_cast<uint64_t>(ctx.iteration)});
  T* mask = mask_.mutable_data();
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < samples; ++n) {
    const CounterRng sample(fold_counter(step.key(), static_cast<uint64_t>(ctx.sample_offset + n)));
    T* m = mask + n * per_sample;
    for (int64_t j = 0; j < per_sample; ++j) m[j] = sample.uniform(j) < p ? T(0) : scale;
  }
}

template <typename T>
void DropoutLayer<T>::forward_cpu(const RunContext& ctx, const BlobVec<T>& bottom,
                                  const BlobVec<T>& top) {
  const T* x = bottom[0]->data();
  T* y = top[0]->mutable_data();
  const int64_t n = bottom[0]->count();
  train_ = ctx.phase == Phase::Train;
  if (!train_) {
    if (x != y) std::copy(x, x + n, y);
    return;
  }
  draw_mask(ctx, bottom[0]->shape(0), bottom[0]->count(1));
  const T* mask = mask_.data();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * mask[i];
}

template <typename T>
void DropoutLayer<T>::backward_cpu(const RunContext&, const BlobVec<T>& top,
                                   const std::vector<bool>& propagate_down,
                                   const BlobVec<T>& bottom) {
  if (!propagate_down[0]) return;
  const T* dy = top[0]->diff();
  T* dx = bottom[0]->mutable_diff();
  const int64_t n = bottom[0]->count();
  if (!train_) {
    if (dx != dy) std::copy(dy, dy + n, dx);
    return;
  }
  const T* mask = mask_.data();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * mask[i];
}

template class DropoutLayer<float>;
template class DropoutLayer<double>;

}  // namespace cgdp
