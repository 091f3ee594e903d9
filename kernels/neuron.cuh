// Launchers for the elementwise layers (neuron_layer.hpp): one kernel per direction over any of
// the element functions of neuron_functions.hpp.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace cgdp::kernels {

// y[i] = f.forward(x[i]).
template <typename T, typename F>
void neuron_forward(const T* x, T* y, int64_t n, const F& f, cudaStream_t stream);
// dx[i] = f.backward(x[i], y[i], dy[i]).
template <typename T, typename F>
void neuron_backward(const T* x, const T* y, const T* dy, T* dx, int64_t n, const F& f, cudaStream_t stream);

}  // namespace cgdp::kernels
