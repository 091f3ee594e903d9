// Stochastic pooling on the CPU: the draw and the window walk of kernels/stochastic_pooling.cu.
#include "cgdp/layers/stochastic_pooling_layer.hpp"

#include <algorithm>

#include "cgdp/core/counter_rng.hpp"
#include "cgdp/layers/spatial_param.hpp"

namespace cgdp {

template <typename T>
StochasticPoolingLayer<T>::StochasticPoolingLayer(const proto::LayerParameter& param, Device& device)
    : Layer<T>(param, device), name_hash_(hash_name(param.name())), chosen_(device, Shape{}, Diff::None) {}

template <typename T>
void StochasticPoolingLayer<T>::layer_setup(const BlobVec<T>&, const BlobVec<T>&, Rng&) {
  const auto& p = this->param_.pooling_param();
  if (p.pad() || p.pad_h() || p.pad_w()) this->fail("stochastic pooling takes no padding (as in Caffe)");
  if (p.global_pooling()) this->fail("stochastic pooling has no global form: give a kernel");
  const uint32_t stride = p.stride(), kernel = p.kernel_size();
  auto given = [](bool has, const uint32_t& v) {
    return has ? std::span<const uint32_t>(&v, 1) : std::span<const uint32_t>();
  };
  const SpatialPair s = spatial_setting(given(p.has_stride(), stride), p.has_stride_h(), p.stride_h(), p.has_stride_w(),
                                        p.stride_w(), 1, "stride");
  const SpatialPair k = spatial_setting(given(p.has_kernel_size(), kernel), p.has_kernel_h(), p.kernel_h(),
                                        p.has_kernel_w(), p.kernel_w(), 0, "kernel_size");
  g_.stride_h = s[0], g_.stride_w = s[1], g_.kernel_h = k[0], g_.kernel_w = k[1];
  if (g_.kernel_h <= 0 || g_.kernel_w <= 0) this->fail("needs a kernel: kernel_size, or kernel_h and kernel_w");
  if (g_.stride_h <= 0 || g_.stride_w <= 0) this->fail("stride must be > 0");
}

template <typename T>
void StochasticPoolingLayer<T>::reshape(const BlobVec<T>& bottom, const BlobVec<T>& top) {
  const Blob<T>& in = *bottom[0];
  if (in.num_axes() != 4) this->fail(cat("needs a 4-D bottom (N x C x H x W), got ", shape_string(in.shape())));
  g_.height = in.shape(2), g_.width = in.shape(3);
  if (g_.kernel_h > g_.height || g_.kernel_w > g_.width)
    this->fail(cat("kernel ", g_.kernel_h, "x", g_.kernel_w, " is larger than the input ", g_.height, "x", g_.width));
  const int64_t up = this->param_.pooling_param().round_mode() == proto::PoolingParameter::CEIL;
  g_.pooled_h = (g_.height - g_.kernel_h + up * (g_.stride_h - 1)) / g_.stride_h + 1;
  g_.pooled_w = (g_.width - g_.kernel_w + up * (g_.stride_w - 1)) / g_.stride_w + 1;
  channels_ = in.shape(1);
  g_.planes = in.shape(0) * channels_;
  top[0]->reshape({in.shape(0), channels_, g_.pooled_h, g_.pooled_w});
  chosen_.reshape(top[0]->shape());
}

template <typename T>
void StochasticPoolingLayer<T>::forward_cpu(const RunContext& ctx, const BlobVec<T>& bottom, const BlobVec<T>& top) {
  const T* x = bottom[0]->data();
  T* y = top[0]->mutable_data();
  T* chosen = chosen_.mutable_data();
  const Geometry g = g_;
  const bool train = ctx.phase == Phase::Train;
  const CounterRng step({ctx.seed, name_hash_, static_cast<uint64_t>(ctx.iteration)});
  const int64_t outputs = g.pooled_h * g.pooled_w;
#pragma omp parallel for schedule(static)
  for (int64_t plane = 0; plane < g.planes; ++plane) {
    const T* in = x + plane * g.height * g.width;
    const int64_t sample = ctx.sample_offset + plane / channels_;
    const CounterRng draws(fold_counter(step.key(), static_cast<uint64_t>(sample)));
    for (int64_t o = 0; o < outputs; ++o) {
      const int64_t h0 = o / g.pooled_w * g.stride_h, w0 = o % g.pooled_w * g.stride_w;
      const int64_t h1 = std::min(h0 + g.kernel_h, g.height), w1 = std::min(w0 + g.kernel_w, g.width);
      T sum = 0, squares = 0;
      for (int64_t h = h0; h < h1; ++h)
        for (int64_t w = w0; w < w1; ++w) sum += in[h * g.width + w], squares += in[h * g.width + w] * in[h * g.width + w];
      const int64_t out = plane * outputs + o;
      if (!train) {
        y[out] = sum > 0 ? squares / sum : T(0);
        chosen[out] = sum;  // backward's denominator
        continue;
      }
      const uint64_t position = static_cast<uint64_t>((plane % channels_) * outputs + o);
      const T threshold = static_cast<T>(draws.uniform(position)) * sum;
      T running = 0;
      int64_t pick = h0 * g.width + w0;
      for (int64_t h = h0, done = 0; h < h1 && !done; ++h)
        for (int64_t w = w0; w < w1; ++w) {
          running += in[h * g.width + w];
          if (running >= threshold) {
            pick = h * g.width + w;
            done = 1;
            break;
          }
        }
      y[out] = in[pick];
      chosen[out] = static_cast<T>(pick);
    }
  }
}

template <typename T>
void StochasticPoolingLayer<T>::backward_cpu(const RunContext& ctx, const BlobVec<T>& top,
                                             const std::vector<bool>& propagate_down, const BlobVec<T>& bottom) {
  if (!propagate_down[0]) return;
  const bool train = ctx.phase == Phase::Train;
  const T* x = bottom[0]->data();
  const T* y = top[0]->data();
  const T* dy = top[0]->diff();
  const T* chosen = chosen_.data();  // training: the input taken; testing: the window's sum
  T* dx = bottom[0]->mutable_diff();
  const Geometry g = g_;
  // Each input gathers the gradient of the windows that took it (no two threads write one input).
#pragma omp parallel for schedule(static)
  for (int64_t plane = 0; plane < g.planes; ++plane)
    for (int64_t h = 0; h < g.height; ++h)
      for (int64_t w = 0; w < g.width; ++w) {
        const int64_t ph0 = h < g.kernel_h ? 0 : (h - g.kernel_h) / g.stride_h + 1;
        const int64_t ph1 = std::min(h / g.stride_h + 1, g.pooled_h);
        const int64_t pw0 = w < g.kernel_w ? 0 : (w - g.kernel_w) / g.stride_w + 1;
        const int64_t pw1 = std::min(w / g.stride_w + 1, g.pooled_w);
        const int64_t i = (plane * g.height + h) * g.width + w;
        T sum = 0;
        for (int64_t ph = ph0; ph < ph1; ++ph)
          for (int64_t pw = pw0; pw < pw1; ++pw) {
            const int64_t o = (plane * g.pooled_h + ph) * g.pooled_w + pw;
            if (train && static_cast<int64_t>(chosen[o]) == h * g.width + w) sum += dy[o];
            // y = sum(x^2) / sum(x): dy / dx_i = (2 x_i - y) / sum(x), Caffe leaves this out.
            if (!train && chosen[o] > 0) sum += dy[o] * (2 * x[i] - y[o]) / chosen[o];
          }
        dx[i] = sum;
      }
}

template class StochasticPoolingLayer<float>;
template class StochasticPoolingLayer<double>;

}  // namespace cgdp
