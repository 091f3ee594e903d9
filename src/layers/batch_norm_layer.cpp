// BatchNorm layer: Caffe's statistics, running-average update and backward, in both modes.
#include "cgdp/layers/batch_norm_layer.hpp"

#include <cmath>
#include <vector>

#include "cgdp/tensor/channel_blocks.hpp"

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
void BatchNormLayer<T>::batch_statistics(const T* x, const ChannelRuns& runs) {
  constexpr int64_t kLanes = ChannelRuns::kMaxLanes;
  const int64_t n = num_, s = spatial_, step = runs.position_stride();
  const double m = static_cast<double>(n * s);
  T* mean = mean_.mutable_data();
  T* variance = variance_.mutable_data();
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < runs.count(); ++r) {
    with_run_lanes(runs, r, [&](auto lanes, auto lane_stride) {
      double sum[kLanes] = {}, squares[kLanes] = {}, mu[kLanes];
      for (int64_t i = 0; i < n; ++i) {
        const T* v = x + runs.at(r, i);
        for (int64_t j = 0; j < s; ++j, v += step)
          for (int64_t l = 0; l < lanes; ++l) sum[l] += v[l * lane_stride];
      }
      for (int64_t l = 0; l < lanes; ++l) mu[l] = sum[l] / m;
      for (int64_t i = 0; i < n; ++i) {
        const T* v = x + runs.at(r, i);
        for (int64_t j = 0; j < s; ++j, v += step)
          for (int64_t l = 0; l < lanes; ++l) {
            const double d = v[l * lane_stride] - mu[l];
            squares[l] += d * d;
          }
      }
      const int64_t first = runs.first_channel(r);
      for (int64_t l = 0; l < lanes; ++l) {
        mean[first + l] = static_cast<T>(mu[l]);
        variance[first + l] = static_cast<T>(squares[l] / m);
      }
    });
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
  const ChannelRuns runs{num_, channels_, spatial_, bottom[0]->channel_block()};
  if (use_global_stats_) {
    const T sum_factor = this->state_[2]->data()[0];
    const T scale = sum_factor == 0 ? T(0) : 1 / sum_factor;
    for (int64_t ch = 0; ch < channels_; ++ch) {
      mean_.mutable_data()[ch] = scale * this->state_[0]->data()[ch];
      variance_.mutable_data()[ch] = scale * this->state_[1]->data()[ch];
    }
  } else {
    batch_statistics(x, runs);
    update_running_statistics();
  }
  for (int64_t ch = 0; ch < channels_; ++ch)
    inv_std_.mutable_data()[ch] = 1 / std::sqrt(variance_.data()[ch] + static_cast<T>(p.eps()));
  const T* mean = mean_.data();
  const T* inv_std = inv_std_.data();
  T* y = top[0]->mutable_data();
  T* x_norm = this->forward_only_ ? y : x_norm_.mutable_data();
  for_each_element(
      runs, [=](int64_t i, int64_t ch) { x_norm[i] = y[i] = (x[i] - mean[ch]) * inv_std[ch]; });
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
  constexpr int64_t kLanes = ChannelRuns::kMaxLanes;
  const int64_t n = num_, s = spatial_;
  const ChannelRuns runs{n, channels_, s, bottom[0]->channel_block()};
  const int64_t step = runs.position_stride();
  const double m = static_cast<double>(n * s);
  // Training: dx = (dy - mean(dy) - y * mean(dy * y)) / std, the means over each channel.
  mean_dy_.assign(static_cast<size_t>(channels_), 0.0);  // 0: with global statistics, dx = dy / std
  mean_dy_y_.assign(mean_dy_.size(), 0.0);
  double* mdy = mean_dy_.data();
  double* mdy_y = mean_dy_y_.data();
  if (!use_global_stats_) {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < runs.count(); ++r) {
      with_run_lanes(runs, r, [&](auto lanes, auto lane_stride) {
        double sum_dy[kLanes] = {}, sum_dy_y[kLanes] = {};
        for (int64_t i = 0; i < n; ++i) {
          const int64_t at = runs.at(r, i);
          for (int64_t j = 0; j < s; ++j)
            for (int64_t l = 0; l < lanes; ++l) {
              const int64_t e = at + j * step + l * lane_stride;
              sum_dy[l] += dy[e];
              sum_dy_y[l] += dy[e] * y[e];
            }
        }
        const int64_t first = runs.first_channel(r);
        for (int64_t l = 0; l < lanes; ++l) {
          mdy[first + l] = sum_dy[l] / m;
          mdy_y[first + l] = sum_dy_y[l] / m;
        }
      });
    }
  }
  for_each_element(runs, [=](int64_t e, int64_t ch) {
    dx[e] = static_cast<T>((dy[e] - mdy[ch] - y[e] * mdy_y[ch]) * static_cast<double>(inv_std[ch]));
  });
}

template class BatchNormLayer<float>;
template class BatchNormLayer<double>;

}  // namespace cgdp
