// BatchNorm layer: Caffe's statistics, running-average update and backward, in both modes.
#include "cgdp/layers/batch_norm_layer.hpp"

#include <cmath>

namespace cgdp {

namespace {

int64_t channels_of(const Shape& shape) {
  return shape.size() > 1 ? shape[1] : 1;
}

}  // namespace

template <typename T>
BatchNormLayer<T>::BatchNormLayer(const proto::LayerParameter& param, Device& device)
    : Layer<T>(param, device),
      mean_(device, Shape{}, Diff::None),
      variance_(device, Shape{}, Diff::None),
      inv_std_(device, Shape{}, Diff::None),
      x_norm_(device, Shape{}, Diff::None) {}

template <typename T>
void BatchNormLayer<T>::layer_setup(const BlobVec<T>& bottom, const BlobVec<T>&, Rng&) {
  const auto& p = this->param_.batch_norm_param();
  if (!(p.eps() > 0.f)) this->fail(cat("eps must be > 0, got ", p.eps()));
  if (!(p.moving_average_fraction() >= 0.f && p.moving_average_fraction() <= 1.f))
    this->fail(cat("moving_average_fraction must be in [0, 1], got ", p.moving_average_fraction()));
  if (bottom[0]->num_axes() < 1) this->fail("needs a bottom with a batch axis, got a scalar");
  const int64_t channels = channels_of(bottom[0]->shape());
  this->add_state({channels});
  this->add_state({channels});
  this->add_state({1});
}

template <typename T>
void BatchNormLayer<T>::reshape(const BlobVec<T>& bottom, const BlobVec<T>& top) {
  const Shape& shape = bottom[0]->shape();
  if (shape.empty()) this->fail("needs a bottom with a batch axis, got a scalar");
  channels_ = channels_of(shape);
  if (channels_ != this->state_[0]->count())
    this->fail(cat("bottom of shape ", shape_string(shape), " has ", channels_,
                   " channels, but the running statistics have ", this->state_[0]->count()));
  num_ = shape[0];
  spatial_ = bottom[0]->count() / std::max<int64_t>(1, num_ * channels_);
  top[0]->reshape(shape);
  if (!this->forward_only_) x_norm_.reshape(shape);  // forward only: the top is all it writes
  for (Blob<T>* b : {&mean_, &variance_, &inv_std_}) b->reshape({channels_});
}

template <typename T>
void BatchNormLayer<T>::batch_statistics(const T* x) {
  const int64_t n = num_, c = channels_, s = spatial_;
  const double m = static_cast<double>(n * s);
  T* mean = mean_.mutable_data();
  T* variance = variance_.mutable_data();
#pragma omp parallel for schedule(static)
  for (int64_t ch = 0; ch < c; ++ch) {
    double sum = 0, squares = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = (i * c + ch) * s; j < (i * c + ch + 1) * s; ++j) sum += x[j];
    const double mu = sum / m;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = (i * c + ch) * s; j < (i * c + ch + 1) * s; ++j)
        squares += (x[j] - mu) * (x[j] - mu);
    mean[ch] = static_cast<T>(mu);
    variance[ch] = static_cast<T>(squares / m);
  }
}

template <typename T>
void BatchNormLayer<T>::update_running_statistics() {
  const T fraction = static_cast<T>(this->param_.batch_norm_param().moving_average_fraction());
  const int64_t m = num_ * spatial_;
  // Caffe stores the unbiased variance: m / (m - 1) times the batch's.
  const T correction = m > 1 ? static_cast<T>(m) / static_cast<T>(m - 1) : T(1);
  T* mean_sum = this->state_[0]->mutable_data();
  T* variance_sum = this->state_[1]->mutable_data();
  T& factor = this->state_[2]->mutable_data()[0];
  factor = factor * fraction + 1;
  for (int64_t ch = 0; ch < channels_; ++ch) {
    mean_sum[ch] = fraction * mean_sum[ch] + mean_.data()[ch];
    variance_sum[ch] = fraction * variance_sum[ch] + correction * variance_.data()[ch];
  }
}

template <typename T>
void BatchNormLayer<T>::forward_cpu(const RunContext& ctx, const BlobVec<T>& bottom,
                                    const BlobVec<T>& top) {
  const auto& p = this->param_.batch_norm_param();
  use_global_stats_ = p.has_use_global_stats() ? p.use_global_stats() : ctx.phase == Phase::Test;
  const T* x = bottom[0]->data();
  if (use_global_stats_) {
    const T sum_factor = this->state_[2]->data()[0];
    const T scale = sum_factor == 0 ? T(0) : 1 / sum_factor;
    for (int64_t ch = 0; ch < channels_; ++ch) {
      mean_.mutable_data()[ch] = scale * this->state_[0]->data()[ch];
      variance_.mutable_data()[ch] = scale * this->state_[1]->data()[ch];
    }
  } else {
    batch_statistics(x);
    update_running_statistics();
  }
  for (int64_t ch = 0; ch < channels_; ++ch)
    inv_std_.mutable_data()[ch] = 1 / std::sqrt(variance_.data()[ch] + static_cast<T>(p.eps()));
  const T* mean = mean_.data();
  const T* inv_std = inv_std_.data();
  T* y = top[0]->mutable_data();
  T* x_norm = this->forward_only_ ? y : x_norm_.mutable_data();
  const int64_t rows = num_ * channels_, s = spatial_;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t ch = r % channels_;
    for (int64_t i = r * s; i < (r + 1) * s; ++i)
      x_norm[i] = y[i] = (x[i] - mean[ch]) * inv_std[ch];
  }
}

template <typename T>
void BatchNormLayer<T>::backward_cpu(const RunContext&, const BlobVec<T>& top,
                                     const std::vector<bool>& propagate_down,
                                     const BlobVec<T>& bottom) {
  if (!propagate_down[0]) return;
  const T* dy = top[0]->diff();
  const T* y = x_norm_.data();
  const T* inv_std = inv_std_.data();
  T* dx = bottom[0]->mutable_diff();
  const int64_t n = num_, c = channels_, s = spatial_;
  const bool global = use_global_stats_;
  const double m = static_cast<double>(n * s);
  // Training: dx = (dy - mean(dy) - y * mean(dy * y)) / std, the means over each channel.
#pragma omp parallel for schedule(static)
  for (int64_t ch = 0; ch < c; ++ch) {
    double mean_dy = 0, mean_dy_y = 0;
    if (!global) {
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = (i * c + ch) * s; j < (i * c + ch + 1) * s; ++j) {
          mean_dy += dy[j];
          mean_dy_y += dy[j] * y[j];
        }
      mean_dy /= m;
      mean_dy_y /= m;
    }
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = (i * c + ch) * s; j < (i * c + ch + 1) * s; ++j)
        dx[j] = static_cast<T>((dy[j] - mean_dy - y[j] * mean_dy_y) * inv_std[ch]);
  }
}

template class BatchNormLayer<float>;
template class BatchNormLayer<double>;

}  // namespace cgdp
