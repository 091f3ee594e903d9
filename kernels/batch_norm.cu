// BatchNorm kernels: one block per channel for the reductions (fixed tree: the same sums on every
// run), elementwise kernels for the rest.
#include "batch_norm.cuh"
#include "launch.cuh"

namespace cgdp::kernels {

namespace {

// Element k of channel ch, k in [0, num * spatial).
__device__ int64_t element(const BatchNormShape& s, int64_t ch, int64_t k) {
  return (k / s.spatial * s.channels + ch) * s.spatial + k % s.spatial;
}

template <typename T>
__global__ void statistics_kernel(const T* x, BatchNormShape s, T* mean, T* variance, T* mean_sum,
                                  T* variance_sum, T* factor, T fraction, T correction) {
  __shared__ double scratch[kReduceThreads];
  const int64_t ch = blockIdx.x, m = s.num * s.spatial;
  double sum = 0;
  for (int64_t k = threadIdx.x; k < m; k += blockDim.x) sum += x[element(s, ch, k)];
  const double mu = block_sum(sum, scratch) / static_cast<double>(m);
  double squares = 0;
  for (int64_t k = threadIdx.x; k < m; k += blockDim.x) {
    const double d = x[element(s, ch, k)] - mu;
    squares += d * d;
  }
  squares = block_sum(squares, scratch);
  if (threadIdx.x != 0) return;
  mean[ch] = static_cast<T>(mu);
  variance[ch] = static_cast<T>(squares / static_cast<double>(m));
  mean_sum[ch] = fraction * mean_sum[ch] + mean[ch];
  variance_sum[ch] = fraction * variance_sum[ch] + correction * variance[ch];
  if (ch == 0) factor[0] = factor[0] * fraction + 1;
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
__global__ void normalize_kernel(const T* x, BatchNormShape s, const T* mean, const T* inv_std,
                                 T* y, T* x_norm, int64_t n) {
  CGDP_KERNEL_LOOP(i, n) {
    const int64_t ch = i / s.spatial % s.channels;
    const T value = (x[i] - mean[ch]) * inv_std[ch];
    x_norm[i] = value;
    y[i] = value;
  }
}

template <typename T>
__global__ void backward_kernel(const T* dy, const T* x_norm, const T* inv_std, BatchNormShape s,
                                bool global, T* dx) {
  __shared__ double scratch[kReduceThreads];
  const int64_t ch = blockIdx.x, m = s.num * s.spatial;
  double mean_dy = 0, mean_dy_y = 0;
  if (!global) {
    for (int64_t k = threadIdx.x; k < m; k += blockDim.x) {
      const int64_t j = element(s, ch, k);
      mean_dy += dy[j];
      mean_dy_y += dy[j] * x_norm[j];  // the product in T, as the CPU layer computes it
    }
    mean_dy = block_sum(mean_dy, scratch) / static_cast<double>(m);
    mean_dy_y = block_sum(mean_dy_y, scratch) / static_cast<double>(m);
  }
  for (int64_t k = threadIdx.x; k < m; k += blockDim.x) {
    const int64_t j = element(s, ch, k);
    dx[j] = static_cast<T>((dy[j] - mean_dy - x_norm[j] * mean_dy_y) * inv_std[ch]);
  }
}

}  // namespace

template <typename T>
void batch_norm_statistics(const T* x, const BatchNormShape& s, T* mean, T* variance, T* mean_sum,
                           T* variance_sum, T* factor, T fraction, T correction,
                           cudaStream_t stream) {
  if (s.channels <= 0) return;
  statistics_kernel<<<static_cast<unsigned>(s.channels), kReduceThreads, 0, stream>>>(
      x, s, mean, variance, mean_sum, variance_sum, factor, fraction, correction);
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
                          T eps, T* inv_std, T* y, T* x_norm, cudaStream_t stream) {
  if (s.channels <= 0) return;
  inv_std_kernel<<<blocks_for(s.channels), kThreads, 0, stream>>>(variance, eps, s.channels, inv_std);
  CUDA_CHECK_LAUNCH();
  const int64_t n = s.num * s.channels * s.spatial;
  if (n <= 0) return;
  normalize_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, s, mean, inv_std, y, x_norm, n);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void batch_norm_backward(const T* dy, const T* x_norm, const T* inv_std, const BatchNormShape& s,
                         bool global, T* dx, cudaStream_t stream) {
  if (s.channels <= 0) return;
  backward_kernel<<<static_cast<unsigned>(s.channels), kReduceThreads, 0, stream>>>(
      dy, x_norm, inv_std, s, global, dx);
  CUDA_CHECK_LAUNCH();
}

#define CGDP_INSTANTIATE(T)                                                                      \
  template void batch_norm_statistics<T>(const T*, const BatchNormShape&, T*, T*, T*, T*, T*, T, \
                                         T, cudaStream_t);                                       \
  template void batch_norm_global_statistics<T>(const T*, const T*, const T*, int64_t, T*, T*,   \
                                                cudaStream_t);                                   \
  template void batch_norm_normalize<T>(const T*, const BatchNormShape&, const T*, const T*, T, \
                                        T*, T*, T*, cudaStream_t);                               \
  template void batch_norm_backward<T>(const T*, const T*, const T*, const BatchNormShape&, bool, \
                                       T*, cudaStream_t);
CGDP_INSTANTIATE(float)
CGDP_INSTANTIATE(double)
#undef CGDP_INSTANTIATE

}  // namespace cgdp::kernels
