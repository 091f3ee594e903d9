// Leaky ReLU kernels: the CPU layer's expressions, element by element.
#include "launch.cuh"
#include "relu.cuh"

namespace cgdp::kernels {

namespace {

template <typename T>
__global__ void relu_forward_kernel(const T* x, T* y, int64_t n, T slope) {
  CGDP_KERNEL_LOOP(i, n) {
    const T v = x[i];
    const T positive = v < T(0) ? T(0) : v;  // std::max(v, 0)
    const T negative = T(0) < v ? T(0) : v;  // std::min(v, 0)
    y[i] = positive + slope * negative;
  }
}

template <typename T>
__global__ void relu_backward_kernel(const T* x, const T* dy, T* dx, int64_t n, T slope) {
  CGDP_KERNEL_LOOP(i, n) { dx[i] = dy[i] * (T(x[i] > 0) + slope * T(x[i] <= 0)); }
}

template <typename T>
__global__ void relu_backward_packed_kernel(const uint16_t* x, uint16_t infinity, const T* dy,
                                            T* dx, int64_t n, T slope) {
  CGDP_KERNEL_LOOP(i, n) {
    const bool positive = static_cast<uint16_t>(x[i] - 1) < infinity;  // read_positive
    dx[i] = positive ? dy[i] : slope == T(0) ? T(0) : slope * dy[i];
  }
}

}  // namespace

template <typename T>
void relu_forward(const T* x, T* y, int64_t n, T slope, cudaStream_t stream) {
  if (n <= 0) return;
  relu_forward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, y, n, slope);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void relu_backward(const T* x, const T* dy, T* dx, int64_t n, T slope, cudaStream_t stream) {
  if (n <= 0) return;
  relu_backward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, dy, dx, n, slope);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void relu_backward_packed(const uint16_t* x, uint16_t infinity, const T* dy, T* dx, int64_t n,
                          T slope, cudaStream_t stream) {
  if (n <= 0) return;
  relu_backward_packed_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, infinity, dy, dx, n,
                                                                      slope);
  CUDA_CHECK_LAUNCH();
}

template void relu_forward<float>(const float*, float*, int64_t, float, cudaStream_t);
template void relu_forward<double>(const double*, double*, int64_t, double, cudaStream_t);
template void relu_backward<float>(const float*, const float*, float*, int64_t, float, cudaStream_t);
template void relu_backward<double>(const double*, const double*, double*, int64_t, double,
                                    cudaStream_t);

template void relu_backward_packed<float>(const uint16_t*, uint16_t, const float*, float*, int64_t,
                                          float, cudaStream_t);
template void relu_backward_packed<double>(const uint16_t*, uint16_t, const double*, double*,
                                           int64_t, double, cudaStream_t);

}  // namespace cgdp::kernels
