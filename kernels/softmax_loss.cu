// SoftmaxWithLoss kernels: the loss as one block's fixed-tree sum, the gradient elementwise.
#include <cfloat>

#include "launch.cuh"
#include "softmax_loss.cuh"

namespace cgdp::kernels {

namespace {

template <typename T>
__global__ void loss_kernel(const T* prob, const int64_t* labels, ClassShape s,
                            LossNormalization mode, T* loss, double* normalizer) {
  __shared__ double scratch[kReduceThreads];
  const int64_t positions = s.outer * s.inner;
  double sum = 0, valid = 0;
  for (int64_t pos = threadIdx.x; pos < positions; pos += blockDim.x) {
    const int64_t l = labels[pos];
    if (l < 0) continue;
    const double p = prob[(pos / s.inner * s.classes + l) * s.inner + pos % s.inner];
    sum -= log(p < FLT_MIN ? static_cast<double>(FLT_MIN) : p);  // std::max: NaN stays NaN
    valid += 1;
  }
  sum = block_sum(sum, scratch);
  valid = block_sum(valid, scratch);
  if (threadIdx.x != 0) return;
  double n = 1;
  if (mode == LossNormalization::Full) n = static_cast<double>(positions);
  if (mode == LossNormalization::Valid) n = valid;
  if (mode == LossNormalization::BatchSize) n = static_cast<double>(s.outer);
  n = n > 1 ? n : 1;  // all-ignored batches give a zero loss, not NaN
  *normalizer = n;
  loss[0] = static_cast<T>(sum / n);
}

template <typename T>
__global__ void gradient_kernel(const T* prob, const int64_t* labels, ClassShape s,
                                const T* loss_diff, const double* normalizer, T* dx, int64_t n) {
  const T scale = static_cast<T>(static_cast<double>(loss_diff[0]) / *normalizer);
  CGDP_KERNEL_LOOP(i, n) {
    const int64_t c = i / s.inner % s.classes;
    const int64_t l = labels[i / (s.classes * s.inner) * s.inner + i % s.inner];
    const T g = l < 0 ? T(0) : prob[i] - (c == l ? T(1) : T(0));
    dx[i] = g * scale;
  }
}

}  // namespace

template <typename T>
void softmax_loss_forward(const T* prob, const int64_t* labels, const ClassShape& shape,
                          LossNormalization mode, T* loss, double* normalizer, cudaStream_t stream) {
  loss_kernel<<<1, kReduceThreads, 0, stream>>>(prob, labels, shape, mode, loss, normalizer);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void softmax_loss_backward(const T* prob, const int64_t* labels, const ClassShape& shape,
                           const T* loss_diff, const double* normalizer, T* dx, cudaStream_t stream) {
  const int64_t n = shape.outer * shape.classes * shape.inner;
  if (n <= 0) return;
  gradient_kernel<<<blocks_for(n), kThreads, 0, stream>>>(prob, labels, shape, loss_diff,
                                                          normalizer, dx, n);
  CUDA_CHECK_LAUNCH();
}

template void softmax_loss_forward<float>(const float*, const int64_t*, const ClassShape&,
                                          LossNormalization, float*, double*, cudaStream_t);
template void softmax_loss_forward<double>(const double*, const int64_t*, const ClassShape&,
                                           LossNormalization, double*, double*, cudaStream_t);
template void softmax_loss_backward<float>(const float*, const int64_t*, const ClassShape&,
                                           const float*, const double*, float*, cudaStream_t);
template void softmax_loss_backward<double>(const double*, const int64_t*, const ClassShape&,
                                            const double*, const double*, double*, cudaStream_t);

}  // namespace cgdp::kernels
