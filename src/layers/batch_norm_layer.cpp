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
void BatchNormLayer<T>::normalise(const T* x, T* x_norm, T* y, const ChannelRuns& runs) {
  constexpr int64_t kLanes = ChannelRuns::kMaxLanes;
  const double m = static_cast<double>(num_ * spatial_);
  const T eps = static_cast<T>(this->param_.batch_norm_param().eps());
  T* mean = mean_.mutable_data();
  T* variance = variance_.mutable_data();
  T* inv_std = inv_std_.mutable_data();
  const T* scale = scale_ ? scale_->data() : nullptr;
  const T* bias = bias_ ? bias_->data() : nullptr;
  const bool batch = !use_global_stats_;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < runs.count(); ++r) {
    with_run_lanes(runs, r, [&](auto lanes, auto lane_stride) {
      const int64_t first = runs.first_channel(r);
      if (batch) {
        double sum[kLanes] = {}, squares[kLanes] = {}, mu[kLanes];
        for_each_in_run_by_position(runs, r, lanes, lane_stride,
                                    [&](int64_t e, int64_t l) { sum[l] += x[e]; });
        for (int64_t l = 0; l < lanes; ++l) mu[l] = sum[l] / m;
        for_each_in_run_by_position(runs, r, lanes, lane_stride, [&](int64_t e, int64_t l) {
          const double d = x[e] - mu[l];
          squares[l] += d * d;
        });
        for (int64_t l = 0; l < lanes; ++l) {
          mean[first + l] = static_cast<T>(mu[l]);
          variance[first + l] = static_cast<T>(squares[l] / m);
        }
      }
      // The lanes' constants in locals, which the stores below cannot alias: the loop vectorises.
      T mean_l[kLanes], inv_l[kLanes], scale_l[kLanes], bias_l[kLanes];
      for (int64_t l = 0; l < lanes; ++l) {
        inv_std[first + l] = 1 / std::sqrt(variance[first + l] + eps);
        mean_l[l] = mean[first + l];
        inv_l[l] = inv_std[first + l];
        scale_l[l] = scale ? scale[first + l] : T(1);
        bias_l[l] = bias ? bias[first + l] : T(0);  // as ScaleLayer adds no bias
      }
      // x_norm before y, which may be x_norm (forward only).
      if (scale)
        for_each_in_run(runs, r, lanes, lane_stride, [&](int64_t e, int64_t l) {
          const T v = (x[e] - mean_l[l]) * inv_l[l];
          x_norm[e] = v;
          y[e] = v * scale_l[l] + bias_l[l];
        });
      else
        for_each_in_run(runs, r, lanes, lane_stride, [&](int64_t e, int64_t l) {
          x_norm[e] = y[e] = (x[e] - mean_l[l]) * inv_l[l];
        });
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
  T* y = top[0]->mutable_data();
  T* x_norm = this->forward_only_ ? y : x_norm_.mutable_data();  // y last: it may be x_norm
  block_ = bottom[0]->channel_block();
  if (use_global_stats_) {
    const T sum_factor = this->state_[2]->data()[0];
    const T factor = sum_factor == 0 ? T(0) : 1 / sum_factor;
    for (int64_t ch = 0; ch < channels_; ++ch) {
      mean_.mutable_data()[ch] = factor * this->state_[0]->data()[ch];
      variance_.mutable_data()[ch] = factor * this->state_[1]->data()[ch];
    }
  }
  normalise(x, x_norm, y, {num_, channels_, spatial_, block_});
  if (!use_global_stats_) update_running_statistics();
}

template <typename T>
void BatchNormLayer<T>::backward_cpu(const RunContext&, const BlobVec<T>& top,
                                     const std::vector<bool>& propagate_down,
                                     const BlobVec<T>& bottom) {
  // Taken over: the Scale after it ran both backwards (backward_through_scale).
  if (!propagate_down[0] || took_over_scale()) return;
  backward_runs(top[0]->diff(), nullptr, nullptr, bottom[0]->mutable_diff());
}

template <typename T>
void BatchNormLayer<T>::backward_through_scale([[maybe_unused]] const RunContext& ctx, const T* dy,
                                               T* scale_diff, T* bias_diff, T* dx) {
#ifdef CGDP_HAVE_CUDA
  if (this->device().kind() == DeviceKind::Cuda)
    return backward_through_scale_cuda(ctx, dy, scale_diff, bias_diff, dx);
#endif
  backward_runs(dy, scale_diff, bias_diff, dx);
}

template <typename T>
void BatchNormLayer<T>::backward_runs(const T* dy, T* scale_diff, T* bias_diff, T* dx) {
  const T* y = x_norm_.data();
  const T* inv_std = inv_std_.data();
  const T* scale = scale_diff ? scale_->data() : nullptr;
  constexpr int64_t kLanes = ChannelRuns::kMaxLanes;
  const ChannelRuns runs{num_, channels_, spatial_, block_};
  const double m = static_cast<double>(num_ * spatial_);
  const bool batch = !use_global_stats_;
  // Training: dx = (g - mean(g) - y * mean(g * y)) / std, the means over each channel, g the
  // top's gradient (dy, or through a Scale taken over dy * scale); with global statistics
  // dx = g / std.
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < runs.count(); ++r) {
    with_run_lanes(runs, r, [&](auto lanes, auto lane_stride) {
      const int64_t first = runs.first_channel(r);
      double sum_g[kLanes] = {}, sum_g_y[kLanes] = {}, sum_dy[kLanes] = {}, sum_dy_y[kLanes] = {};
      if (scale)  // the Scale's sums and this layer's, with the bits each took on its own
        for_each_in_run_by_position(runs, r, lanes, lane_stride, [&](int64_t e, int64_t l) {
          sum_dy_y[l] += dy[e] * y[e];
          sum_dy[l] += dy[e];
          const T g = dy[e] * scale[first + l];
          if (batch) {
            sum_g[l] += g;
            sum_g_y[l] += g * y[e];
          }
        });
      else if (batch)
        for_each_in_run_by_position(runs, r, lanes, lane_stride, [&](int64_t e, int64_t l) {
          sum_g[l] += dy[e];
          sum_g_y[l] += dy[e] * y[e];
        });
      // The lanes' constants in locals, which dx cannot alias: the loop vectorises.
      double mean_g[kLanes], mean_g_y[kLanes], inv_l[kLanes];
      T scale_l[kLanes];
      for (int64_t l = 0; l < lanes; ++l) {
        mean_g[l] = sum_g[l] / m;
        mean_g_y[l] = sum_g_y[l] / m;
        inv_l[l] = static_cast<double>(inv_std[first + l]);
        scale_l[l] = scale ? scale[first + l] : T(1);
        if (!scale) continue;
        scale_diff[first + l] += static_cast<T>(sum_dy_y[l]);
        if (bias_diff) bias_diff[first + l] += static_cast<T>(sum_dy[l]);
      }
      const auto input_gradient = [&](int64_t e, int64_t l, T g) {
        dx[e] = static_cast<T>((g - mean_g[l] - y[e] * mean_g_y[l]) * inv_l[l]);
      };
      if (scale)
        for_each_in_run(runs, r, lanes, lane_stride,
                        [&](int64_t e, int64_t l) { input_gradient(e, l, dy[e] * scale_l[l]); });
      else
        for_each_in_run(runs, r, lanes, lane_stride,
                        [&](int64_t e, int64_t l) { input_gradient(e, l, dy[e]); });
    });
  }
}

template class BatchNormLayer<float>;
template class BatchNormLayer<double>;

}  // namespace cgdp
