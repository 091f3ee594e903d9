// Launch shapes shared by the kernels (nvcc only): grid-stride loops over n elements, and one
// block per reduction with a fixed-shape tree, so sums come out the same on every run.
#pragma once

#include <cuda_runtime.h>

#include <climits>
#include <cstdint>

#include "cuda/cuda_check.hpp"

namespace cgdp::kernels {

constexpr int kThreads = 256;        // elementwise kernels
constexpr int kReduceThreads = 256;  // one block per reduction (a power of two)

// Enough blocks to cover n with kThreads each, capped: the loops below stride over the rest.
inline int blocks_for(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 1 ? 1 : (blocks > 8192 ? 8192 : blocks));
}

__device__ __forceinline__ int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
__device__ __forceinline__ int64_t max64(int64_t a, int64_t b) { return a < b ? b : a; }

// k / d and k % d for k >= 0, d > 0: in 32 bits when both fit, a fraction of the instructions
// of a 64-bit division (which index arithmetic per element would otherwise be bound by).
struct QuotientRemainder {
  int64_t quotient, remainder;
};
__device__ __forceinline__ QuotientRemainder divide(int64_t k, int64_t d) {
  if (k <= INT_MAX && d <= INT_MAX) {
    const unsigned q = static_cast<unsigned>(k) / static_cast<unsigned>(d);
    return {q, k - static_cast<int64_t>(q) * d};
  }
  return {k / d, k % d};
}

// for (i = this thread's first element; i < n; i += all threads)
#define CGDP_KERNEL_LOOP(i, n)                                                        \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)

// Sums `value` over the block (kReduceThreads threads) in a fixed tree; every thread gets the
// result (mvn.cu relies on it). `scratch` holds kReduceThreads values. Ends with the block
// synchronized, so the scratch may be reused at once.
template <typename V>
__device__ V block_sum(V value, V* scratch) {
  scratch[threadIdx.x] = value;
  __syncthreads();
  for (int half = kReduceThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) scratch[threadIdx.x] += scratch[threadIdx.x + half];
    __syncthreads();
  }
  const V total = scratch[0];
  __syncthreads();
  return total;
}

}  // namespace cgdp::kernels
