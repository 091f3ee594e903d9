// Launcher for the GPU SGD step (momentum + weight decay), in stream order.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace cgdp::kernels {

template <typename T>
void sgd_update(T* data, const T* diff, T* history, int64_t n, T lr, T momentum, T decay,
                cudaStream_t stream);

}  // namespace cgdp::kernels
