// Launchers for Eltwise (SUM with coefficients, PROD, MAX) over up to kMaxEltwiseBottoms bottoms.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace cgdp::kernels {

enum class EltwiseOp { Prod = 0, Sum = 1, Max = 2 };  // Caffe's EltwiseParameter order

constexpr int kMaxEltwiseBottoms = 32;

// The bottoms, passed to the kernels by value.
template <typename T>
struct EltwiseInputs {
  const T* x[kMaxEltwiseBottoms];
  T coeff[kMaxEltwiseBottoms];
  int count;
};

// y = coeff[0] * x[0] + coeff[1] * x[1] + ... (SUM), x[0] * x[1] * ... (PROD) or the maximum with
// winner = the index of the first bottom holding it (MAX); left to right, as the CPU layer.
template <typename T>
void eltwise_forward(const EltwiseInputs<T>& in, EltwiseOp op, int64_t n, T* y, T* winner,
                     cudaStream_t stream);
// Bottom b's gradient: coeff[b] * dy (SUM), dy * the product of the other bottoms (PROD), dy
// where b won (MAX).
template <typename T>
void eltwise_backward(const EltwiseInputs<T>& in, EltwiseOp op, int b, int64_t n, const T* dy,
                      const T* winner, T* dx, cudaStream_t stream);

}  // namespace cgdp::kernels
