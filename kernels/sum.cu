// Fixed-order sums of device buffers, and a fill, as kernels.
#include "launch.cuh"
#include "sum.cuh"

namespace cgdp::kernels {

namespace {

constexpr int kMaxSources = 16;  // per launch; more sources are folded in further launches

template <typename T>
struct Sources {
  const T* p[kMaxSources];
  int count;
};

// dst = srcs[0] + srcs[1] + ..., left to right; `fold` adds onto dst's current value instead.
template <typename T>
__global__ void sum_kernel(T* dst, Sources<T> srcs, bool fold, int64_t n) {
  CGDP_KERNEL_LOOP(i, n) {
    T acc = fold ? dst[i] : srcs.p[0][i];
    for (int k = fold ? 0 : 1; k < srcs.count; ++k) acc += srcs.p[k][i];
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
  // ((s0 + ... + s15) + s16) + ...: each later launch continues the same left-to-right chain.
  for (int first = 0; first < count; first += kMaxSources) {
    Sources<T> batch{};
    batch.count = count - first < kMaxSources ? count - first : kMaxSources;
    for (int k = 0; k < batch.count; ++k) batch.p[k] = srcs[first + k];
    sum_kernel<<<blocks_for(n), kThreads, 0, stream>>>(dst, batch, first > 0, n);
    CUDA_CHECK_LAUNCH();
  }
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
