// SGD with momentum and weight decay on the GPU, the twin of src/solver/sgd.cpp's sgd_update.
#include <cuda_runtime.h>

#include "sgd_update.cuh"
#include "../src/cuda/cuda_check.hpp"

namespace cgdp::kernels {

namespace {

template <typename T>
__global__ void sgd_update_kernel(T* data, const T* diff, T* history, int64_t n, T lr, T momentum,
                                  T decay) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const T g = diff[i] + decay * data[i];
    const T h = momentum * history[i] + lr * g;
    history[i] = h;
    data[i] -= h;
  }
}

}  // namespace

template <typename T>
void sgd_update(T* data, const T* diff, T* history, int64_t n, T lr, T momentum, T decay,
                cudaStream_t stream) {
  if (n <= 0) return;
  const int threads = 256;
  const int blocks = static_cast<int>(std::min<int64_t>((n + threads - 1) / threads, 65535));
  sgd_update_kernel<<<blocks, threads, 0, stream>>>(data, diff, history, n, lr, momentum, decay);
  CUDA_CHECK_LAUNCH();
}

template void sgd_update<float>(float*, const float*, float*, int64_t, float, float, float, cudaStream_t);
template void sgd_update<double>(double*, const double*, double*, int64_t, double, double, double,
                                 cudaStream_t);

}  // namespace cgdp::kernels
