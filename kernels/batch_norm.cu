// BatchNorm kernels: per-channel sums in slices of images (per_channel.cuh: float64 partials in
// fixed trees, added in slice order, so the same sums on every run), elementwise passes by planes.
#include "batch_norm.cuh"
#include "per_channel.cuh"

namespace cgdp::kernels {

namespace {

ChannelView view_of(const BatchNormShape& s) {
  return {s.num, s.channels, s.spatial};
}

// Sums of d and d^2, d = x - the channel's first element: one pass, and d keeps the sums small
// (a shifted variance loses nothing to a large mean).
template <typename T>
__global__ void statistics_partials_kernel(const T* x, ChannelView v, double* partials) {
  slice_sums(
      v,
      [&](int64_t i, int64_t c) {
        const double d = static_cast<double>(x[i]) - static_cast<double>(x[c * v.spatial]);
        return make_double2(d, d * d);
      },
      partials);
}

template <typename T>
__global__ void statistics_kernel(const T* x, ChannelView v, const double* partials, T* mean,
                                  T* variance, T* mean_sum, T* variance_sum, T* factor, T fraction,
                                  T correction) {
  const double m = static_cast<double>(v.num * v.spatial);
  CGDP_KERNEL_LOOP(ch, v.channels) {
    const double2 sums = channel_sums(v, partials, ch);
    const double shift_mean = sums.x / m;
    mean[ch] = static_cast<T>(static_cast<double>(x[ch * v.spatial]) + shift_mean);
    variance[ch] = static_cast<T>(fmax(sums.y / m - shift_mean * shift_mean, 0.0));
    mean_sum[ch] = fraction * mean_sum[ch] + mean[ch];
    variance_sum[ch] = fraction * variance_sum[ch] + correction * variance[ch];
    if (ch == 0) factor[0] = factor[0] * fraction + 1;
  }
}

template <typename T>
__global__ void global_kernel(const T* mean_sum, const T* variance_sum, const T* factor,
                              int64_t channels, T* mean, T* variance) {
  const T scale = factor[0] == 0 ? T(0) : 1 / factor[0];
  CGDP_KERNEL_LOOP(ch, channels) {
    mean[ch] = scale * mean_sum[ch];
    variance[ch] = scale * variance_sum[ch];
  }
}

template <typename T>
__global__ void inv_std_kernel(const T* variance, T eps, int64_t channels, T* inv_std) {
  CGDP_KERNEL_LOOP(ch, channels) { inv_std[ch] = 1 / sqrt(variance[ch] + eps); }
}

template <typename T>
__global__ void normalize_kernel(const T* x, ChannelView v, bool flat, const T* mean,
                                 const T* inv_std, T* y, T* x_norm, ScaleInside<T> inside) {
  for_elements(v, flat, [&](int64_t i, int64_t c) {
    const T value = (x[i] - mean[c]) * inv_std[c];
    x_norm[i] = value;  // before y, which it may be
    if (!inside.scale) {
      y[i] = value;
      return;
    }
    const T scaled = value * inside.scale[c] + (inside.bias ? inside.bias[c] : T(0));
    if (!inside.relu) {
      y[i] = scaled;
      return;
    }
    const T positive = scaled < T(0) ? T(0) : scaled;  // as relu_forward_kernel, slope 0
    const T negative = T(0) < scaled ? T(0) : scaled;
    y[i] = positive + T(0) * negative;
  });
}

// Sums of dy and dy * x_norm (the product in T, as the CPU layer computes it).
template <typename T>
__global__ void backward_partials_kernel(const T* dy, const T* x_norm, ChannelView v,
                                         double* partials) {
  slice_sums(
      v,
      [&](int64_t i, int64_t) {
        return make_double2(static_cast<double>(dy[i]), static_cast<double>(dy[i] * x_norm[i]));
      },
      partials);
}

// means[c] = mean(g), means[C + c] = mean(g * x_norm) over channel c (0 with the global
// statistics); g = dy, or dy * scale with a Scale inside, which gets its gradients here.
template <typename T>
__global__ void backward_means_kernel(ChannelView v, const double* partials, bool global,
                                      ScaleInside<T> inside, double* means) {
  const double m = static_cast<double>(v.num * v.spatial);
  CGDP_KERNEL_LOOP(ch, v.channels) {
    const double2 sums = channel_sums(v, partials, ch);  // of dy, and of dy * x_norm
    const double scale = inside.scale ? static_cast<double>(inside.scale[ch]) : 1.0;
    means[ch] = global ? 0.0 : scale * sums.x / m;
    means[v.channels + ch] = global ? 0.0 : scale * sums.y / m;
    if (!inside.scale) continue;
    inside.scale_diff[ch] += static_cast<T>(sums.y);
    if (inside.bias_diff) inside.bias_diff[ch] += static_cast<T>(sums.x);
  }
}

template <typename T>
__global__ void input_diff_kernel(const T* dy, const T* x_norm, const T* inv_std, ChannelView v,
                                  bool flat, const double* means, const T* scale, T* dx) {
  for_elements(v, flat, [&](int64_t i, int64_t c) {
    const double mean_g = means ? means[c] : 0.0, mean_g_y = means ? means[v.channels + c] : 0.0;
    const T g = scale ? dy[i] * scale[c] : dy[i];  // the Scale's input gradient, in T
    dx[i] = static_cast<T>((g - mean_g - x_norm[i] * mean_g_y) * inv_std[c]);
  });
}

}  // namespace

int64_t batch_norm_scratch_bytes(const BatchNormShape& s) {
  return per_channel_scratch_bytes(view_of(s));
}

template <typename T>
void batch_norm_statistics(const T* x, const BatchNormShape& s, T* mean, T* variance, T* mean_sum,
                           T* variance_sum, T* factor, T fraction, T correction, void* scratch,
                           cudaStream_t stream) {
  if (s.channels <= 0 || s.num * s.spatial <= 0) return;
  const ChannelView v = view_of(s);
  auto* partials = static_cast<double*>(scratch);
  statistics_partials_kernel<<<slice_grid(v), kReduceThreads, 0, stream>>>(x, v, partials);
  CUDA_CHECK_LAUNCH();
  statistics_kernel<<<blocks_for(s.channels), kThreads, 0, stream>>>(
      x, v, partials, mean, variance, mean_sum, variance_sum, factor, fraction, correction);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void batch_norm_global_statistics(const T* mean_sum, const T* variance_sum, const T* factor,
                                  int64_t channels, T* mean, T* variance, cudaStream_t stream) {
  if (channels <= 0) return;
  global_kernel<<<blocks_for(channels), kThreads, 0, stream>>>(mean_sum, variance_sum, factor,
                                                               channels, mean, variance);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void batch_norm_normalize(const T* x, const BatchNormShape& s, const T* mean, const T* variance,
                          T eps, T* inv_std, T* y, T* x_norm, const ScaleInside<T>& inside,
                          cudaStream_t stream) {
  if (s.channels <= 0) return;
  inv_std_kernel<<<blocks_for(s.channels), kThreads, 0, stream>>>(variance, eps, s.channels, inv_std);
  CUDA_CHECK_LAUNCH();
  if (s.num * s.spatial <= 0) return;
  const PlaneLaunch launch = plane_launch(view_of(s));
  normalize_kernel<<<launch.grid, kThreads, 0, stream>>>(x, view_of(s), launch.flat, mean, inv_std,
                                                         y, x_norm, inside);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void batch_norm_backward(const T* dy, const T* x_norm, const T* inv_std, const BatchNormShape& s,
                         bool global, const ScaleInside<T>& inside, T* dx, void* scratch,
                         cudaStream_t stream) {
  if (s.channels <= 0 || s.num * s.spatial <= 0) return;
  const ChannelView v = view_of(s);
  auto* partials = static_cast<double*>(scratch);
  const double* means = nullptr;
  if (!global || inside.scale) {  // a Scale inside needs its sums with the global statistics too
    double* after_partials = partials + 2 * v.channels * channel_slices(v).count;
    backward_partials_kernel<<<slice_grid(v), kReduceThreads, 0, stream>>>(dy, x_norm, v, partials);
    CUDA_CHECK_LAUNCH();
    backward_means_kernel<<<blocks_for(s.channels), kThreads, 0, stream>>>(v, partials, global,
                                                                           inside, after_partials);
    CUDA_CHECK_LAUNCH();
    means = after_partials;
  }
  const PlaneLaunch launch = plane_launch(v);
  input_diff_kernel<<<launch.grid, kThreads, 0, stream>>>(dy, x_norm, inv_std, v, launch.flat,
                                                          means, inside.scale, dx);
  CUDA_CHECK_LAUNCH();
}

#define CGDP_INSTANTIATE(T)                                                                       \
  template void batch_norm_statistics<T>(const T*, const BatchNormShape&, T*, T*, T*, T*, T*, T,  \
                                         T, void*, cudaStream_t);                                 \
  template void batch_norm_global_statistics<T>(const T*, const T*, const T*, int64_t, T*, T*,    \
                                                cudaStream_t);                                    \
  template void batch_norm_normalize<T>(const T*, const BatchNormShape&, const T*, const T*, T,   \
                                        T*, T*, T*, const ScaleInside<T>&, cudaStream_t);         \
  template void batch_norm_backward<T>(const T*, const T*, const T*, const BatchNormShape&, bool, \
                                       const ScaleInside<T>&, T*, void*, cudaStream_t);
CGDP_INSTANTIATE(float)
CGDP_INSTANTIATE(double)
#undef CGDP_INSTANTIATE

}  // namespace cgdp::kernels
