// Launcher for ArgMax (argmax_layer.hpp): one thread per row selects its top_k by repeated scans.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace cgdp::kernels {

struct ArgMaxGeometry {
  int64_t rows = 0, dim = 0, stride = 1, top_k = 1;
  bool has_axis = false, out_max_val = false;
};

template <typename T>
void argmax_forward(const T* x, const ArgMaxGeometry& g, T* y, cudaStream_t stream);

}  // namespace cgdp::kernels
