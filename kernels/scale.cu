// Scale kernels: elementwise forward and input gradient; one block per scale element for the
// parameter gradients (fixed-tree sums).
#include "launch.cuh"
#include "scale.cuh"

namespace cgdp::kernels {

namespace {

template <typename T>
__global__ void forward_kernel(const T* x, const T* scale, const T* bias, ScaleShape s, T* y,
                               int64_t n) {
  CGDP_KERNEL_LOOP(i, n) {
    const int64_t d = i / s.inner % s.dim;
    y[i] = x[i] * scale[d] + (bias ? bias[d] : T(0));
  }
}

template <typename T>
__global__ void param_diff_kernel(const T* x, const T* dy, ScaleShape s, T* scale_diff,
                                  T* bias_diff) {
  __shared__ double scratch[kReduceThreads];
  const int64_t d = blockIdx.x, m = s.outer * s.inner;
  double ds = 0, db = 0;
  for (int64_t k = threadIdx.x; k < m; k += blockDim.x) {
    const int64_t i = (k / s.inner * s.dim + d) * s.inner + k % s.inner;
    ds += dy[i] * x[i];  // the product in T, as the CPU layer computes it
    db += dy[i];
  }
  ds = block_sum(ds, scratch);
  db = block_sum(db, scratch);
  if (threadIdx.x != 0) return;
  scale_diff[d] += static_cast<T>(ds);
  if (bias_diff) bias_diff[d] += static_cast<T>(db);
}

template <typename T>
__global__ void input_diff_kernel(const T* dy, const T* scale, ScaleShape s, T* dx, int64_t n) {
  CGDP_KERNEL_LOOP(i, n) { dx[i] = dy[i] * scale[i / s.inner % s.dim]; }
}

int64_t count(const ScaleShape& s) { return s.outer * s.dim * s.inner; }

}  // namespace

template <typename T>
void scale_forward(const T* x, const T* scale, const T* bias, const ScaleShape& s, T* y,
                   cudaStream_t stream) {
  const int64_t n = count(s);
  if (n <= 0) return;
  forward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, scale, bias, s, y, n);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void scale_backward(const T* x, const T* dy, const T* scale, const ScaleShape& s, T* scale_diff,
                    T* bias_diff, T* dx, cudaStream_t stream) {
  const int64_t n = count(s);
  if (n <= 0) return;
  param_diff_kernel<<<static_cast<unsigned>(s.dim), kReduceThreads, 0, stream>>>(x, dy, s,
                                                                                 scale_diff, bias_diff);
  CUDA_CHECK_LAUNCH();
  if (!dx) return;
  input_diff_kernel<<<blocks_for(n), kThreads, 0, stream>>>(dy, scale, s, dx, n);
  CUDA_CHECK_LAUNCH();
}

template void scale_forward<float>(const float*, const float*, const float*, const ScaleShape&,
                                   float*, cudaStream_t);
template void scale_forward<double>(const double*, const double*, const double*, const ScaleShape&,
                                    double*, cudaStream_t);
template void scale_backward<float>(const float*, const float*, const float*, const ScaleShape&,
                                    float*, float*, float*, cudaStream_t);
template void scale_backward<double>(const double*, const double*, const double*, const ScaleShape&,
                                     double*, double*, double*, cudaStream_t);

}  // namespace cgdp::kernels
