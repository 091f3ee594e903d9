// Dropout kernels: each thread draws its element's mask from the counters alone.
#include "cgdp/core/counter_rng.hpp"
#include "dropout.cuh"
#include "launch.cuh"

namespace cgdp::kernels {

namespace {

template <typename T>
__global__ void forward_kernel(const T* x, T* y, T* mask, int64_t n, int64_t per_sample,
                               uint64_t step_key, int64_t sample_offset, double ratio,
                               T keep_scale) {
  CGDP_KERNEL_LOOP(i, n) {
    const int64_t sample = i / per_sample, j = i % per_sample;
    const CounterRng rng(fold_counter(step_key, static_cast<uint64_t>(sample_offset + sample)));
    const T m = rng.uniform(static_cast<uint64_t>(j)) < ratio ? T(0) : keep_scale;
    mask[i] = m;
    y[i] = x[i] * m;
  }
}

template <typename T>
__global__ void backward_kernel(const T* dy, const T* mask, T* dx, int64_t n) {
  CGDP_KERNEL_LOOP(i, n) { dx[i] = dy[i] * mask[i]; }
}

}  // namespace

template <typename T>
void dropout_forward(const T* x, T* y, T* mask, int64_t samples, int64_t per_sample,
                     uint64_t step_key, int64_t sample_offset, double ratio, T keep_scale,
                     cudaStream_t stream) {
  const int64_t n = samples * per_sample;
  if (n <= 0) return;
  forward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, y, mask, n, per_sample, step_key,
                                                         sample_offset, ratio, keep_scale);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void dropout_backward(const T* dy, const T* mask, T* dx, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  backward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(dy, mask, dx, n);
  CUDA_CHECK_LAUNCH();
}

template void dropout_forward<float>(const float*, float*, float*, int64_t, int64_t, uint64_t,
                                     int64_t, double, float, cudaStream_t);
template void dropout_forward<double>(const double*, double*, double*, int64_t, int64_t, uint64_t,
                                      int64_t, double, double, cudaStream_t);
template void dropout_backward<float>(const float*, const float*, float*, int64_t, cudaStream_t);
template void dropout_backward<double>(const double*, const double*, double*, int64_t,
                                       cudaStream_t);

}  // namespace cgdp::kernels
