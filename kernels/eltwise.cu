// Eltwise kernels: one thread per element, every bottom read in order.
#include "eltwise.cuh"
#include "launch.cuh"

namespace cgdp::kernels {

namespace {

template <typename T>
__global__ void forward_kernel(EltwiseInputs<T> in, EltwiseOp op, int64_t n, T* y, T* winner) {
  CGDP_KERNEL_LOOP(i, n) {
    T acc = op == EltwiseOp::Sum ? in.coeff[0] * in.x[0][i] : in.x[0][i];
    int best = 0;
    for (int b = 1; b < in.count; ++b) {
      const T v = in.x[b][i];
      if (op == EltwiseOp::Sum) {
        acc += in.coeff[b] * v;
      } else if (op == EltwiseOp::Prod) {
        acc *= v;
      } else if (v > acc) {  // MAX: ties go to the earlier bottom
        acc = v;
        best = b;
      }
    }
    y[i] = acc;
    if (op == EltwiseOp::Max) winner[i] = static_cast<T>(best);
  }
}

template <typename T>
__global__ void backward_kernel(EltwiseInputs<T> in, EltwiseOp op, int b, int64_t n, const T* dy,
                                const T* winner, T* dx) {
  CGDP_KERNEL_LOOP(i, n) {
    if (op == EltwiseOp::Sum) {
      dx[i] = in.coeff[b] * dy[i];
    } else if (op == EltwiseOp::Prod) {
      T others = 1;
      for (int k = 0; k < in.count; ++k)
        if (k != b) others *= in.x[k][i];
      dx[i] = dy[i] * others;
    } else {
      dx[i] = winner[i] == static_cast<T>(b) ? dy[i] : T(0);
    }
  }
}

}  // namespace

template <typename T>
void eltwise_forward(const EltwiseInputs<T>& in, EltwiseOp op, int64_t n, T* y, T* winner,
                     cudaStream_t stream) {
  if (n <= 0) return;
  forward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(in, op, n, y, winner);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void eltwise_backward(const EltwiseInputs<T>& in, EltwiseOp op, int b, int64_t n, const T* dy,
                      const T* winner, T* dx, cudaStream_t stream) {
  if (n <= 0) return;
  backward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(in, op, b, n, dy, winner, dx);
  CUDA_CHECK_LAUNCH();
}

template void eltwise_forward<float>(const EltwiseInputs<float>&, EltwiseOp, int64_t, float*, float*,
                                     cudaStream_t);
template void eltwise_forward<double>(const EltwiseInputs<double>&, EltwiseOp, int64_t, double*,
                                      double*, cudaStream_t);
template void eltwise_backward<float>(const EltwiseInputs<float>&, EltwiseOp, int, int64_t,
                                      const float*, const float*, float*, cudaStream_t);
template void eltwise_backward<double>(const EltwiseInputs<double>&, EltwiseOp, int, int64_t,
                                       const double*, const double*, double*, cudaStream_t);

}  // namespace cgdp::kernels
