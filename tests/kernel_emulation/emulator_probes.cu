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

// Each thread writes its slot, then reads its neighbour's (the next thread's, the last thread
// thread 0's): with `synchronized` a barrier between, as it must be; without, the bug under test.
// `tag` is the launch's own, so that a slot still holding an earlier launch's value is told apart.
__global__ void exchange_kernel(int tag, bool synchronized, bool after_barrier, int* saw) {
  __shared__ int slots[kExchangeThreads];
  if (after_barrier) __syncthreads();  // the exchange in fibers' rounds rather than plain calls
  slots[threadIdx.x] = tag + static_cast<int>(threadIdx.x);
  if (synchronized) __syncthreads();
  const unsigned next = (threadIdx.x + 1) % blockDim.x;
  saw[threadIdx.x] = slots[next] == tag + static_cast<int>(next);
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

void neighbour_exchange(bool synchronized, bool after_barrier, int* saw, cudaStream_t stream) {
  static int launches = 0;
  const int tag = ++launches * 1000;
  exchange_kernel<<<1, kExchangeThreads, 0, stream>>>(tag, synchronized, after_barrier, saw);
  CUDA_CHECK_LAUNCH();
}

}  // namespace cgdp::emulator_probes
