// Fixed-order sums of device buffers (host_sum's tree order), and a fill, as kernels.
#include <stdexcept>

#include "launch.cuh"
#include "sum.cuh"

namespace cgdp::kernels {

namespace {

constexpr int kMaxSources = 32;  // per launch: Split and Eltwise fan-outs, ps0's and the fold's 2

template <typename T>
struct Sources {
  const T* p[kMaxSources];
  int count;
};

// dst = the sum of srcs in host_sum's binary-tree order ((s0 + s1) + (s2 + s3)) + ...: source k
// merges with as many pending partial sums as k has trailing one bits.
template <typename T>
__global__ void sum_kernel(T* dst, Sources<T> srcs, int64_t n) {
  // The tree of two or three sources without the pending array (local memory): Split's and
  // Eltwise's usual fan-outs, the same additions.
  if (srcs.count == 2) {
    CGDP_KERNEL_LOOP(i, n) {
      dst[i] = srcs.p[0][i] + srcs.p[1][i];
    }
    return;
  }
  if (srcs.count == 3) {
    CGDP_KERNEL_LOOP(i, n) {
      dst[i] = (srcs.p[0][i] + srcs.p[1][i]) + srcs.p[2][i];
    }
    return;
  }
  CGDP_KERNEL_LOOP(i, n) {
    T pending[6];  // log2(kMaxSources) + 1
    int depth = 0;
    for (int k = 0; k < srcs.count; ++k) {
      T cur = srcs.p[k][i];
      for (unsigned bits = k; bits & 1u; bits >>= 1) cur = pending[--depth] + cur;
      pending[depth++] = cur;
    }
    T acc = pending[--depth];
    while (depth > 0) acc = pending[--depth] + acc;
    dst[i] = acc;
  }
}

template <typename T>
__global__ void fill_kernel(T* p, int64_t n, T value) {
  CGDP_KERNEL_LOOP(i, n) { p[i] = value; }
}

}  // namespace

template <typename T>
void sum_buffers(T* dst, const T* const* srcs, int count, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  if (count == 0) {
    fill(dst, n, T(0), stream);
    return;
  }
  if (count > kMaxSources)
    throw std::invalid_argument("kernels::sum_buffers: more than 32 sources in one sum");
  Sources<T> batch{};
  batch.count = count;
  for (int k = 0; k < count; ++k) batch.p[k] = srcs[k];
  sum_kernel<<<blocks_for(n), kThreads, 0, stream>>>(dst, batch, n);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void fill(T* p, int64_t n, T value, cudaStream_t stream) {
  if (n <= 0) return;
  fill_kernel<<<blocks_for(n), kThreads, 0, stream>>>(p, n, value);
  CUDA_CHECK_LAUNCH();
}

template void sum_buffers<float>(float*, const float* const*, int, int64_t, cudaStream_t);
template void sum_buffers<double>(double*, const double* const*, int, int64_t, cudaStream_t);
template void fill<float>(float*, int64_t, float, cudaStream_t);
template void fill<double>(double*, int64_t, double, cudaStream_t);

}  // namespace cgdp::kernels
