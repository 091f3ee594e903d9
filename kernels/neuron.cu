// The elementwise layers on the GPU: the CPU layer's element functions, one thread per element.
#include "cgdp/layers/neuron_functions.hpp"
#include "launch.cuh"
#include "neuron.cuh"

namespace cgdp::kernels {

namespace {

template <typename T, typename F>
__global__ void forward_kernel(const T* x, T* y, int64_t n, F f) {
  CGDP_KERNEL_LOOP(i, n) { y[i] = f.forward(x[i]); }
}

template <typename T, typename F>
__global__ void backward_kernel(const T* x, const T* y, const T* dy, T* dx, int64_t n, F f) {
  CGDP_KERNEL_LOOP(i, n) { dx[i] = f.backward(x[i], y[i], dy[i]); }
}

}  // namespace

template <typename T, typename F>
void neuron_forward(const T* x, T* y, int64_t n, const F& f, cudaStream_t stream) {
  if (n <= 0) return;
  forward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, y, n, f);
  CUDA_CHECK_LAUNCH();
}

template <typename T, typename F>
void neuron_backward(const T* x, const T* y, const T* dy, T* dx, int64_t n, const F& f, cudaStream_t stream) {
  if (n <= 0) return;
  backward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, y, dy, dx, n, f);
  CUDA_CHECK_LAUNCH();
}

#define CGDP_NEURON_KERNELS(Fn, T)                                                                  \
  template void neuron_forward<T, neuron::Fn<T>>(const T*, T*, int64_t, const neuron::Fn<T>&, cudaStream_t); \
  template void neuron_backward<T, neuron::Fn<T>>(const T*, const T*, const T*, T*, int64_t,           \
                                                 const neuron::Fn<T>&, cudaStream_t);
#define CGDP_NEURON_BOTH(Fn) CGDP_NEURON_KERNELS(Fn, float) CGDP_NEURON_KERNELS(Fn, double)
CGDP_NEURON_BOTH(Sigmoid)
CGDP_NEURON_BOTH(TanH)
CGDP_NEURON_BOTH(AbsVal)
CGDP_NEURON_BOTH(BNLL)
CGDP_NEURON_BOTH(Power)
CGDP_NEURON_BOTH(Exp)
CGDP_NEURON_BOTH(Log)
CGDP_NEURON_BOTH(ELU)
CGDP_NEURON_BOTH(Threshold)

}  // namespace cgdp::kernels
