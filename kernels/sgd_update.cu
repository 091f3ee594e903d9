// SGD with momentum and weight decay on the GPU, the twin of src/solver/sgd.cpp's sgd_update.
#include "launch.cuh"
#include "sgd_update.cuh"

namespace cgdp::kernels {

namespace {

template <typename T>
__global__ void sgd_update_kernel(T* data, const T* diff, T* history, int64_t n, double grad_scale,
                                  bool scaled, T lr, T momentum, T decay) {
  CGDP_KERNEL_LOOP(i, n) {
    const T g = scaled ? static_cast<T>(static_cast<double>(diff[i]) * grad_scale) : diff[i];
    const T h = momentum * history[i] + lr * (g + decay * data[i]);
    history[i] = h;
    data[i] -= h;
  }
}

}  // namespace

template <typename T>
void sgd_update(T* data, const T* diff, T* history, int64_t n, double grad_scale, T lr, T momentum,
                T decay, cudaStream_t stream) {
  if (n <= 0) return;
  sgd_update_kernel<<<blocks_for(n), kThreads, 0, stream>>>(data, diff, history, n, grad_scale,
                                                            grad_scale != 1.0, lr, momentum, decay);
  CUDA_CHECK_LAUNCH();
}

template void sgd_update<float>(float*, const float*, float*, int64_t, double, float, float, float,
                                cudaStream_t);
template void sgd_update<double>(double*, const double*, double*, int64_t, double, double, double,
                                 double, cudaStream_t);

}  // namespace cgdp::kernels
