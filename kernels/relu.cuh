// Launchers for leaky ReLU (negative_slope != 0; plain ReLU goes through cuDNN).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace cgdp::kernels {

// y = max(x, 0) + slope * min(x, 0), with std::max/min's NaN behaviour (as the CPU layer).
template <typename T>
void relu_forward(const T* x, T* y, int64_t n, T slope, cudaStream_t stream);
// dx = dy * ((x > 0) + slope * (x <= 0)).
template <typename T>
void relu_backward(const T* x, const T* dy, T* dx, int64_t n, T slope, cudaStream_t stream);
// The same from the 16-bit copy of x (bf16 or fp16 bits whose +infinity is `infinity`), as the
// CPU layer's relu_gradient_packed: dx = x > 0 ? dy : slope * dy (0 for slope 0).
template <typename T>
void relu_backward_packed(const uint16_t* x, uint16_t infinity, const T* dy, T* dx, int64_t n,
                          T slope, cudaStream_t stream);

}  // namespace cgdp::kernels
