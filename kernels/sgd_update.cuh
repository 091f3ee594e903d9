// Launcher for the GPU SGD step (momentum + weight decay), in stream order.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace cgdp::kernels {

// For i in [0, n), as src/solver/sgd.cpp's sgd_update after Solver::step scales the gradient:
//   g = T(double(diff) * grad_scale);  history = momentum * history + lr * (g + decay * data);
//   data -= history.
// `diff` is only read (the CPU path leaves it scaled; nothing reads it before it is zeroed).
template <typename T>
void sgd_update(T* data, const T* diff, T* history, int64_t n, double grad_scale, T lr, T momentum,
                T decay, cudaStream_t stream);

}  // namespace cgdp::kernels
