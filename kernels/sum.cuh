// Launcher for the fixed-order sum of device buffers (Split's backward, ps0's tree, folding
// accumulated micro-batches): the order of src/sync/host_sum.cpp, so the same bits.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace cgdp::kernels {

// dst[i] = the sum of srcs[.][i] in host_sum's binary-tree order, for i in [0, n); zero when count
// is 0; at most 32 sources (std::invalid_argument otherwise). dst may be one of the sources
// exactly, never partly overlap one. `srcs` is read on the host.
template <typename T>
void sum_buffers(T* dst, const T* const* srcs, int count, int64_t n, cudaStream_t stream);

// p[i] = value for i in [0, n).
template <typename T>
void fill(T* p, int64_t n, T value, cudaStream_t stream);

}  // namespace cgdp::kernels
