// Accuracy kernel: one block counts every position (exact integer sums).
#include "accuracy.cuh"
#include "launch.cuh"

namespace cgdp::kernels {

namespace {

template <typename T>
__global__ void accuracy_kernel(const T* scores, const int64_t* labels, ClassShape s, int64_t top_k,
                                T* out) {
  __shared__ long long scratch[kReduceThreads];
  long long correct = 0, counted = 0;
  for (int64_t pos = threadIdx.x; pos < s.outer * s.inner; pos += blockDim.x) {
    const int64_t l = labels[pos];
    if (l < 0) continue;
    const T* score = scores + pos / s.inner * s.classes * s.inner + pos % s.inner;
    const T target = score[l * s.inner];
    int64_t at_least_as_good = 0;  // includes the label itself
    // !(a < b), not a >= b: a NaN score ranks above the label (a NaN row is never correct).
    for (int64_t c = 0; c < s.classes; ++c) at_least_as_good += !(score[c * s.inner] < target);
    correct += at_least_as_good <= top_k;
    ++counted;
  }
  correct = block_sum(correct, scratch);
  counted = block_sum(counted, scratch);
  if (threadIdx.x == 0)
    out[0] = counted ? static_cast<T>(static_cast<double>(correct) / counted) : T(0);
}

}  // namespace

template <typename T>
void accuracy(const T* scores, const int64_t* labels, const ClassShape& shape, int64_t top_k, T* out,
              cudaStream_t stream) {
  accuracy_kernel<<<1, kReduceThreads, 0, stream>>>(scores, labels, shape, top_k, out);
  CUDA_CHECK_LAUNCH();
}

template void accuracy<float>(const float*, const int64_t*, const ClassShape&, int64_t, float*,
                              cudaStream_t);
template void accuracy<double>(const double*, const int64_t*, const ClassShape&, int64_t, double*,
                               cudaStream_t);

}  // namespace cgdp::kernels
