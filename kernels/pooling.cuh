// Launchers for Caffe's MAX and AVE pooling (the CPU layer's windows, tie rule and divisor).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace cgdp::kernels {

struct PoolShape {
  int64_t planes = 0;  // images x channels
  int64_t height = 0, width = 0, pooled_h = 0, pooled_w = 0;
  int64_t kernel_h = 0, kernel_w = 0, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
};

// out = the window's first maximum (row-major scan); argmax = its place in the window
// (layers/pool_window_code.hpp: Code uint8_t, uint16_t or uint32_t; nullptr: not kept, a
// forward-only net).
template <typename T, typename Code>
void max_pool_forward(const T* in, T* out, Code* argmax, const PoolShape& s, cudaStream_t stream);
// out = window sum / (window clipped to the padded input), as Caffe.
template <typename T>
void ave_pool_forward(const T* in, T* out, const PoolShape& s, cudaStream_t stream);
// Each input element gathers the outputs that chose it (or whose window holds it, for AVE) in
// ascending output order: the CPU layer's scatter order, so the same sums.
template <typename T, typename Code>
void max_pool_backward(const T* out_diff, const Code* argmax, T* in_diff, const PoolShape& s,
                       cudaStream_t stream);
template <typename T>
void ave_pool_backward(const T* out_diff, T* in_diff, const PoolShape& s, cudaStream_t stream);

}  // namespace cgdp::kernels
