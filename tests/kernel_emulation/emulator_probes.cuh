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

}  // namespace cgdp::emulator_probes
