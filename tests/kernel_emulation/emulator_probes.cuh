// Kernels that probe the emulator itself (kernel_emulation_test): written as CUDA and converted
// like kernels/*.cu, so that they also exercise convert_launches.py.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace cgdp::emulator_probes {

// sums[b] = the sum of values[b * kReduceThreads + t] over t, by launch.cuh's block_sum (one block
// of kReduceThreads threads per sum).
void block_sums(const double* values, int blocks, double* sums, cudaStream_t stream);
// Launches a kernel that writes 1 to *ran with this configuration, then CUDA_CHECK_LAUNCH().
void launch_configured(dim3 grid, dim3 block, size_t shared_bytes, int* ran, cudaStream_t stream);
// One block of `threads` threads: every thread but `skipping` reaches a __syncthreads.
void barrier_skipped_by(unsigned skipping, unsigned threads, cudaStream_t stream);

// One block of kExchangeThreads threads exchanging values through shared memory: thread t writes
// its slot, then reads thread t + 1's (the last thread reads thread 0's); saw[t] = 1 if it read
// the value written in this launch, else 0. With `synchronized` a __syncthreads between (every
// saw[t] is 1); without, a missing barrier whose reads depend on the threads' order. With
// `after_barrier` the exchange follows a __syncthreads (the emulator's fibers), else nothing
// before it (its fast path).
constexpr unsigned kExchangeThreads = 64;
void neighbour_exchange(bool synchronized, bool after_barrier, int* saw, cudaStream_t stream);

}  // namespace cgdp::emulator_probes
