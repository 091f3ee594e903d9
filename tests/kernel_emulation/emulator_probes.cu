// Kernels that probe the emulator itself (emulator_probes.cuh).
#include "emulator_probes.cuh"
#include "launch.cuh"

namespace cgdp::emulator_probes {

using kernels::block_sum;
using kernels::kReduceThreads;

namespace {

__global__ void block_sum_kernel(const double* values, double* sums) {
  __shared__ double scratch[kReduceThreads];
  const double total = block_sum(values[blockIdx.x * kReduceThreads + threadIdx.x], scratch);
  if (threadIdx.x == 0) sums[blockIdx.x] = total;
}

__global__ void mark_kernel(int* ran) {
  *ran = 1;
}

__global__ void barrier_kernel(unsigned skipping) {
  if (threadIdx.x != skipping) __syncthreads();
}

}  // namespace

void block_sums(const double* values, int blocks, double* sums, cudaStream_t stream) {
  block_sum_kernel<<<blocks, kReduceThreads>>>(values, sums);
  CUDA_CHECK_LAUNCH();
}

void launch_configured(dim3 grid, dim3 block, size_t shared_bytes, int* ran, cudaStream_t stream) {
  mark_kernel<<<grid, block, shared_bytes, stream>>>(ran);
  CUDA_CHECK_LAUNCH();
}

void barrier_skipped_by(unsigned skipping, unsigned threads, cudaStream_t stream) {
  barrier_kernel<<<1, threads, 0, stream>>>(skipping);
  CUDA_CHECK_LAUNCH();
}

}  // namespace cgdp::emulator_probes
