// Launchers for PReLU (prelu_layer.hpp): a bottom viewed as outer x channels x inner, a slope per
// channel or one shared.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace cgdp::kernels {

struct PReLUShape {
  int64_t outer = 0, channels = 0, inner = 0;
  bool shared = false;
};

// y = max(x, 0) + a min(x, 0); y may be x.
template <typename T>
void prelu_forward(const T* x, const T* a, const PReLUShape& s, T* y, cudaStream_t stream);
// da[c] += T(sum over c's elements with x <= 0 of dy x) (one block per slope, float64); then, unless
// dx is null, dx = x > 0 ? dy : a dy (dx may be dy).
template <typename T>
void prelu_backward(const T* x, const T* dy, const T* a, const PReLUShape& s, T* da, T* dx, cudaStream_t stream);

}  // namespace cgdp::kernels
