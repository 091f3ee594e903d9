// Launchers for stochastic pooling (stochastic_pooling_layer.hpp): one thread per output forward,
// one per input backward.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace cgdp::kernels {

struct StochasticPoolGeometry {
  int64_t planes = 0, channels = 1, height = 0, width = 0, pooled_h = 0, pooled_w = 0;
  int64_t kernel_h = 0, kernel_w = 0, stride_h = 1, stride_w = 1;
};

// train: y = the input drawn with the key (step_key, sample_offset + plane / channels); chosen
// holds its index. Otherwise y = sum(x^2) / sum(x).
template <typename T>
void stochastic_pool_forward(const T* x, const StochasticPoolGeometry& g, bool train, uint64_t step_key,
                             int64_t sample_offset, T* y, T* chosen, cudaStream_t stream);
// train: dx = the sum of dy over the windows that took each input; otherwise the gradient of
// sum(x^2) / sum(x), the window sums in `chosen`.
template <typename T>
void stochastic_pool_backward(const T* x, const T* y, const T* dy, const T* chosen, const StochasticPoolGeometry& g,
                              bool train, T* dx, cudaStream_t stream);

}  // namespace cgdp::kernels
