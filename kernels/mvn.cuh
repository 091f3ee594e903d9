// Launchers for MVN (mvn_layer.hpp): one block per row, sums in float64 in a fixed order.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace cgdp::kernels {

template <typename T>
void mvn_forward(const T* x, int64_t rows, int64_t dim, bool variance, double eps, T* y, T* scale, cudaStream_t stream);
template <typename T>
void mvn_backward(const T* y, const T* dy, const T* scale, int64_t rows, int64_t dim, bool variance, T* dx,
                  cudaStream_t stream);

}  // namespace cgdp::kernels
