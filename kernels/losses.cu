// The regression and metric-learning losses on the GPU: the CPU layers' formulas
// (src/layers/loss_layers.cpp), sums by one block in a fixed order.
#include "launch.cuh"
#include "losses.cuh"

namespace cgdp::kernels {

namespace {

template <typename T>
__global__ void euclidean_forward_kernel(const T* a, const T* b, T* diff, int64_t n, int64_t batch, T* loss) {
  __shared__ double scratch[kReduceThreads];
  double sum = 0;
  for (int64_t i = threadIdx.x; i < n; i += kReduceThreads) {
    diff[i] = a[i] - b[i];
    sum += static_cast<double>(diff[i]) * diff[i];
  }
  sum = block_sum(sum, scratch);
  if (threadIdx.x == 0) *loss = static_cast<T>(sum / batch / 2);
}

template <typename T>
__global__ void scaled_kernel(const T* diff, int64_t n, T sign_over_batch, const T* loss_weight, T* dx) {
  const T scale = sign_over_batch * *loss_weight;
  CGDP_KERNEL_LOOP(i, n) { dx[i] = scale * diff[i]; }
}

// Caffe's get_normalizer, at least 1 (modes: FULL 0, VALID 1, BATCH_SIZE 2, NONE 3).
__device__ double normalizer_of(int mode, int64_t count, int64_t outer, double valid) {
  const double n = mode == 0 ? static_cast<double>(count) : mode == 1 ? valid : mode == 2 ? static_cast<double>(outer) : 1.0;
  return n < 1 ? 1.0 : n;
}

template <typename T>
__global__ void sigmoid_ce_forward_kernel(const T* x, const T* t, int64_t n, bool has_ignore, T ignore, int mode,
                                          int64_t outer, T* loss, double* normalizer) {
  __shared__ double scratch[kReduceThreads];
  double sum = 0, valid = 0;
  for (int64_t i = threadIdx.x; i < n; i += kReduceThreads) {
    if (has_ignore && t[i] == ignore) continue;
    const double v = x[i], positive = v >= 0;
    sum -= v * (t[i] - positive) - log1p(exp(v - 2 * v * positive));
    valid += 1;
  }
  sum = block_sum(sum, scratch);
  valid = block_sum(valid, scratch);
  if (threadIdx.x == 0) {
    *normalizer = normalizer_of(mode, n, outer, valid);
    *loss = static_cast<T>(sum / *normalizer);
  }
}

template <typename T>
__global__ void sigmoid_ce_backward_kernel(const T* x, const T* t, int64_t n, bool has_ignore, T ignore,
                                           const double* normalizer, const T* loss_weight, T* dx) {
  const T scale = static_cast<T>(*loss_weight / *normalizer);
  CGDP_KERNEL_LOOP(i, n) {
    const bool ignored = has_ignore && t[i] == ignore;
    dx[i] = ignored ? T(0) : scale * (T(1) / (T(1) + exp(-x[i])) - t[i]);
  }
}

template <typename T>
__global__ void contrastive_forward_kernel(const T* a, const T* b, const T* similar, int64_t pairs, int64_t dim,
                                           T margin, bool legacy, T* diff, T* dist_sq, T* loss) {
  __shared__ double scratch[kReduceThreads];
  double sum = 0;
  for (int64_t i = threadIdx.x; i < pairs; i += kReduceThreads) {
    double sq = 0;
    for (int64_t c = 0; c < dim; ++c) {
      const int64_t k = i * dim + c;
      diff[k] = a[k] - b[k];
      sq += static_cast<double>(diff[k]) * diff[k];
    }
    dist_sq[i] = static_cast<T>(sq);
    if (static_cast<int>(similar[i])) {
      sum += sq;
    } else if (legacy) {
      sum += fmax(static_cast<double>(margin) - sq, 0.0);
    } else {
      const double gap = fmax(static_cast<double>(margin) - sqrt(sq), 0.0);
      sum += gap * gap;
    }
  }
  sum = block_sum(sum, scratch);
  if (threadIdx.x == 0) *loss = static_cast<T>(sum / static_cast<double>(pairs) / 2);
}

template <typename T>
__global__ void contrastive_backward_kernel(const T* similar, const T* diff, const T* dist_sq, int64_t pairs,
                                            int64_t dim, T margin, bool legacy, T sign_over_pairs,
                                            const T* loss_weight, T* dx) {
  const T alpha = sign_over_pairs * *loss_weight;
  CGDP_KERNEL_LOOP(k, pairs * dim) {
    const int64_t i = k / dim;
    T factor = 0;
    if (static_cast<int>(similar[i])) {
      factor = alpha;
    } else if (legacy) {
      factor = margin - dist_sq[i] > 0 ? -alpha : T(0);
    } else {
      const T dist = sqrt(dist_sq[i]);
      const T gap = margin - dist;
      factor = gap > 0 ? -alpha * gap / (dist + T(1e-4)) : T(0);
    }
    dx[k] = factor * diff[k];
  }
}

template <typename T>
__global__ void hinge_forward_kernel(const T* x, const int64_t* labels, int64_t outer, int64_t classes, bool l2,
                                     T* margins, T* loss) {
  __shared__ double scratch[kReduceThreads];
  double sum = 0;
  for (int64_t j = threadIdx.x; j < outer * classes; j += kReduceThreads) {
    const int64_t i = j / classes, k = j % classes;
    const T s = k == labels[i] ? -x[j] : x[j];
    const T m = T(1) + s > T(0) ? T(1) + s : T(0);
    margins[j] = m;
    sum += l2 ? static_cast<double>(m) * m : static_cast<double>(m);
  }
  sum = block_sum(sum, scratch);
  if (threadIdx.x == 0) *loss = static_cast<T>(sum / static_cast<double>(outer));
}

template <typename T>
__global__ void hinge_backward_kernel(const T* margins, const int64_t* labels, int64_t outer, int64_t classes, bool l2,
                                      const T* loss_weight, T* dx) {
  const T scale = *loss_weight / static_cast<T>(outer);
  CGDP_KERNEL_LOOP(j, outer * classes) {
    const int64_t i = j / classes, k = j % classes;
    const T sign = k == labels[i] ? T(-1) : T(1);
    const T slope = l2 ? T(2) * margins[j] : T(margins[j] > T(0));
    dx[j] = scale * sign * slope;
  }
}

}  // namespace

template <typename T>
void euclidean_forward(const T* a, const T* b, T* diff, int64_t n, int64_t batch, T* loss, cudaStream_t stream) {
  euclidean_forward_kernel<<<1, kReduceThreads, 0, stream>>>(a, b, diff, n, batch, loss);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void scaled_by_loss_weight(const T* diff, int64_t n, T sign_over_batch, const T* loss_weight, T* dx, cudaStream_t stream) {
  if (n <= 0) return;
  scaled_kernel<<<blocks_for(n), kThreads, 0, stream>>>(diff, n, sign_over_batch, loss_weight, dx);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void sigmoid_ce_forward(const T* x, const T* t, int64_t n, bool has_ignore, T ignore, int mode, int64_t outer, T* loss,
                        double* normalizer, cudaStream_t stream) {
  sigmoid_ce_forward_kernel<<<1, kReduceThreads, 0, stream>>>(x, t, n, has_ignore, ignore, mode, outer, loss, normalizer);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void sigmoid_ce_backward(const T* x, const T* t, int64_t n, bool has_ignore, T ignore, const double* normalizer,
                         const T* loss_weight, T* dx, cudaStream_t stream) {
  if (n <= 0) return;
  sigmoid_ce_backward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, t, n, has_ignore, ignore, normalizer,
                                                                     loss_weight, dx);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void contrastive_forward(const T* a, const T* b, const T* similar, int64_t pairs, int64_t dim, T margin, bool legacy,
                         T* diff, T* dist_sq, T* loss, cudaStream_t stream) {
  contrastive_forward_kernel<<<1, kReduceThreads, 0, stream>>>(a, b, similar, pairs, dim, margin, legacy, diff,
                                                               dist_sq, loss);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void contrastive_backward(const T* similar, const T* diff, const T* dist_sq, int64_t pairs, int64_t dim, T margin,
                          bool legacy, T sign_over_pairs, const T* loss_weight, T* dx, cudaStream_t stream) {
  if (pairs * dim <= 0) return;
  contrastive_backward_kernel<<<blocks_for(pairs * dim), kThreads, 0, stream>>>(
      similar, diff, dist_sq, pairs, dim, margin, legacy, sign_over_pairs, loss_weight, dx);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void hinge_forward(const T* x, const int64_t* labels, int64_t outer, int64_t classes, bool l2, T* margins, T* loss,
                   cudaStream_t stream) {
  hinge_forward_kernel<<<1, kReduceThreads, 0, stream>>>(x, labels, outer, classes, l2, margins, loss);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void hinge_backward(const T* margins, const int64_t* labels, int64_t outer, int64_t classes, bool l2,
                    const T* loss_weight, T* dx, cudaStream_t stream) {
  if (outer * classes <= 0) return;
  hinge_backward_kernel<<<blocks_for(outer * classes), kThreads, 0, stream>>>(margins, labels, outer, classes, l2,
                                                                              loss_weight, dx);
  CUDA_CHECK_LAUNCH();
}

#define CGDP_LOSS_KERNELS(T)                                                                                      \
  template void euclidean_forward<T>(const T*, const T*, T*, int64_t, int64_t, T*, cudaStream_t);                  \
  template void scaled_by_loss_weight<T>(const T*, int64_t, T, const T*, T*, cudaStream_t);                        \
  template void sigmoid_ce_forward<T>(const T*, const T*, int64_t, bool, T, int, int64_t, T*, double*, cudaStream_t); \
  template void sigmoid_ce_backward<T>(const T*, const T*, int64_t, bool, T, const double*, const T*, T*,           \
                                       cudaStream_t);                                                              \
  template void contrastive_forward<T>(const T*, const T*, const T*, int64_t, int64_t, T, bool, T*, T*, T*,        \
                                       cudaStream_t);                                                              \
  template void contrastive_backward<T>(const T*, const T*, const T*, int64_t, int64_t, T, bool, T, const T*, T*,  \
                                        cudaStream_t);                                                             \
  template void hinge_forward<T>(const T*, const int64_t*, int64_t, int64_t, bool, T*, T*, cudaStream_t);          \
  template void hinge_backward<T>(const T*, const int64_t*, int64_t, int64_t, bool, const T*, T*, cudaStream_t);
CGDP_LOSS_KERNELS(float)
CGDP_LOSS_KERNELS(double)

}  // namespace cgdp::kernels
