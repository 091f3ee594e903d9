// PReLU on the GPU, the twin of src/layers/prelu_layer.cpp.
#include "launch.cuh"
#include "prelu.cuh"

namespace cgdp::kernels {

namespace {

template <typename T>
__device__ T slope_of(const T* a, int64_t i, const PReLUShape& s) {
  return a[s.shared ? 0 : (i / s.inner) % s.channels];
}

template <typename T>
__global__ void forward_kernel(const T* x, const T* a, PReLUShape s, T* y, int64_t n) {
  CGDP_KERNEL_LOOP(i, n) {
    const T v = x[i];
    y[i] = (v < T(0) ? T(0) : v) + slope_of(a, i, s) * (T(0) < v ? T(0) : v);
  }
}

// One block per slope: the elements of its channel (every channel when shared).
template <typename T>
__global__ void slope_gradient_kernel(const T* x, const T* dy, PReLUShape s, T* da) {
  __shared__ double scratch[kReduceThreads];
  const int64_t c = blockIdx.x;
  const int64_t rows = s.shared ? s.outer * s.channels : s.outer;
  double sum = 0;
  for (int64_t j = threadIdx.x; j < rows * s.inner; j += kReduceThreads) {
    const int64_t row = j / s.inner, k = j % s.inner;
    const int64_t i = s.shared ? row * s.inner + k : ((row * s.channels + c) * s.inner + k);
    if (x[i] <= T(0)) sum += static_cast<double>(dy[i]) * x[i];
  }
  sum = block_sum(sum, scratch);
  if (threadIdx.x == 0) da[c] += static_cast<T>(sum);
}

template <typename T>
__global__ void input_gradient_kernel(const T* x, const T* dy, const T* a, PReLUShape s, T* dx, int64_t n) {
  CGDP_KERNEL_LOOP(i, n) { dx[i] = x[i] > T(0) ? dy[i] : slope_of(a, i, s) * dy[i]; }
}

}  // namespace

template <typename T>
void prelu_forward(const T* x, const T* a, const PReLUShape& s, T* y, cudaStream_t stream) {
  const int64_t n = s.outer * s.channels * s.inner;
  if (n <= 0) return;
  forward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, a, s, y, n);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void prelu_backward(const T* x, const T* dy, const T* a, const PReLUShape& s, T* da, T* dx, cudaStream_t stream) {
  const int64_t n = s.outer * s.channels * s.inner;
  if (n <= 0) return;
  slope_gradient_kernel<<<static_cast<unsigned>(s.shared ? 1 : s.channels), kReduceThreads, 0, stream>>>(x, dy, s, da);
  CUDA_CHECK_LAUNCH();
  if (!dx) return;
  input_gradient_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, dy, a, s, dx, n);
  CUDA_CHECK_LAUNCH();
}

template void prelu_forward<float>(const float*, const float*, const PReLUShape&, float*, cudaStream_t);
template void prelu_forward<double>(const double*, const double*, const PReLUShape&, double*, cudaStream_t);
template void prelu_backward<float>(const float*, const float*, const float*, const PReLUShape&, float*, float*,
                                    cudaStream_t);
template void prelu_backward<double>(const double*, const double*, const double*, const PReLUShape&, double*, double*,
                                     cudaStream_t);

}  // namespace cgdp::kernels
