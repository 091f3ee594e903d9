// MVN on the GPU, the twin of src/layers/mvn_layer.cpp: one block per row.
#include "launch.cuh"
#include "mvn.cuh"

namespace cgdp::kernels {

namespace {

template <typename T>
__global__ void forward_kernel(const T* x, int64_t dim, bool variance, double eps, T* y, T* scale) {
  __shared__ double scratch[kReduceThreads];
  const T* xr = x + blockIdx.x * dim;
  T* yr = y + blockIdx.x * dim;
  double sum = 0;
  for (int64_t i = threadIdx.x; i < dim; i += kReduceThreads) sum += xr[i];
  const T mean = static_cast<T>(block_sum(sum, scratch) / dim);
  double squares = 0;
  for (int64_t i = threadIdx.x; i < dim; i += kReduceThreads) {
    yr[i] = xr[i] - mean;
    squares += static_cast<double>(yr[i]) * yr[i];
  }
  squares = block_sum(squares, scratch);
  const T s = variance ? static_cast<T>(sqrt(squares / dim) + eps) : T(1);
  if (threadIdx.x == 0) scale[blockIdx.x] = s;
  for (int64_t i = threadIdx.x; i < dim; i += kReduceThreads) yr[i] /= s;
}

template <typename T>
__global__ void backward_kernel(const T* y, const T* dy, const T* scale, int64_t dim, bool variance, T* dx) {
  __shared__ double scratch[kReduceThreads];
  const int64_t r = blockIdx.x;
  const T* yr = y + r * dim;
  const T* dyr = dy + r * dim;
  T* dxr = dx + r * dim;
  double sum_dy = 0, sum_ydy = 0;
  for (int64_t i = threadIdx.x; i < dim; i += kReduceThreads) {
    sum_dy += dyr[i];
    sum_ydy += static_cast<double>(yr[i]) * dyr[i];
  }
  const T mean_dy = static_cast<T>(block_sum(sum_dy, scratch) / dim);
  const T mean_ydy = static_cast<T>(block_sum(sum_ydy, scratch) / dim);
  for (int64_t i = threadIdx.x; i < dim; i += kReduceThreads)
    dxr[i] = variance ? (dyr[i] - mean_dy - yr[i] * mean_ydy) / scale[r] : dyr[i] - mean_dy;
}

}  // namespace

template <typename T>
void mvn_forward(const T* x, int64_t rows, int64_t dim, bool variance, double eps, T* y, T* scale, cudaStream_t stream) {
  if (rows <= 0 || dim <= 0) return;
  forward_kernel<<<static_cast<unsigned>(rows), kReduceThreads, 0, stream>>>(x, dim, variance, eps, y, scale);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void mvn_backward(const T* y, const T* dy, const T* scale, int64_t rows, int64_t dim, bool variance, T* dx,
                  cudaStream_t stream) {
  if (rows <= 0 || dim <= 0) return;
  backward_kernel<<<static_cast<unsigned>(rows), kReduceThreads, 0, stream>>>(y, dy, scale, dim, variance, dx);
  CUDA_CHECK_LAUNCH();
}

template void mvn_forward<float>(const float*, int64_t, int64_t, bool, double, float*, float*, cudaStream_t);
template void mvn_forward<double>(const double*, int64_t, int64_t, bool, double, double*, double*, cudaStream_t);
template void mvn_backward<float>(const float*, const float*, const float*, int64_t, int64_t, bool, float*, cudaStream_t);
template void mvn_backward<double>(const double*, const double*, const double*, int64_t, int64_t, bool, double*,
                                   cudaStream_t);

}  // namespace cgdp::kernels
