// Launchers for Dropout with the CPU layer's counter-based masks (include/cgdp/core/counter_rng.hpp):
// the same mask bits on every backend.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace cgdp::kernels {

// Element j of sample n: mask = uniform(fold_counter(step_key, sample_offset + n), j) < ratio ? 0
// : keep_scale; y = x * mask (y may be x). step_key = CounterRng({seed, layer hash, iteration}).
template <typename T>
void dropout_forward(const T* x, T* y, T* mask, int64_t samples, int64_t per_sample,
                     uint64_t step_key, int64_t sample_offset, double ratio, T keep_scale,
                     cudaStream_t stream);
// dx = dy * mask.
template <typename T>
void dropout_backward(const T* dy, const T* mask, T* dx, int64_t n, cudaStream_t stream);

}  // namespace cgdp::kernels
