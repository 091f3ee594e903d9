// LRN kernels: per element, the window sum in the CPU layer's order (channels ascending; or rows
// of the square, each summed left to right, added top to bottom).
#include "cgdp/layers/lrn_column.hpp"
#include "launch.cuh"
#include "lrn.cuh"

namespace cgdp::kernels {

namespace {

__device__ float power(float base, float exponent) { return powf(base, exponent); }
__device__ double power(double base, double exponent) { return pow(base, exponent); }

// Window sum around element i of v (or of v^2 when kSquare).
template <bool kSquare, typename T>
__device__ T window_sum(const T* v, int64_t i, const LrnShape& s) {
  const int64_t plane = s.height * s.width, half = (s.size - 1) / 2;
  const int64_t j = i % plane, c = i / plane % s.channels;
  T sum = 0;
  if (s.across) {
    const T* first = v + (i / plane - c) * plane + j;  // channel 0 of this image, same pixel
    for (int64_t n = max64(c - half, 0); n <= min64(c + half, s.channels - 1); ++n) {
      const T value = first[n * plane];
      sum += kSquare ? value * value : value;
    }
    return sum;
  }
  const int64_t h = j / s.width, w = j % s.width;
  const T* in = v + (i - j);
  for (int64_t y = max64(h - half, 0); y <= min64(h + half, s.height - 1); ++y) {
    T row = 0;
    for (int64_t x = max64(w - half, 0); x <= min64(w + half, s.width - 1); ++x) {
      const T value = in[y * s.width + x];
      row += kSquare ? value * value : value;
    }
    sum += row;
  }
  return sum;
}

template <typename T>
__global__ void scale_kernel(const T* x, T* scale, LrnShape s, int64_t n, T alpha_over_n, T k) {
  CGDP_KERNEL_LOOP(i, n) { scale[i] = k + alpha_over_n * window_sum<true>(x, i, s); }
}

template <typename T>
__global__ void output_kernel(const T* x, const T* scale, T* y, int64_t n, T beta) {
  CGDP_KERNEL_LOOP(i, n) { y[i] = x[i] * power(scale[i], -beta); }
}

template <typename T>
__global__ void work_kernel(const T* x, const T* scale, const T* dy, T* work, int64_t n, T beta) {
  CGDP_KERNEL_LOOP(i, n) {
    work[i] = dy[i] * (x[i] * power(scale[i], -beta)) / scale[i];
  }
}

// Where a column's input begins: its values, or (bf16 copy) a reader that widens them.
template <typename T>
__device__ const T* column_at(const T* x, int64_t at) {
  return x + at;
}
__device__ lrn::Bf16Values column_at(const uint16_t* x, int64_t at) {
  return {x + at};
}

template <typename T>
__global__ void across_forward_kernel(const T* x, T* y, LrnShape s, int64_t columns, T alpha_over_n,
                                      T k, T beta) {
  const int64_t plane = s.height * s.width;
  CGDP_KERNEL_LOOP(column, columns) {
    const int64_t at = column / plane * s.channels * plane + column % plane;
    lrn::across_forward_column(x + at, y + at, plane, static_cast<int>(s.channels),
                               static_cast<int>(s.size), alpha_over_n, k, beta);
  }
}

template <typename T, typename Input>
__global__ void across_backward_kernel(const Input* x, const T* dy, T* dx, LrnShape s,
                                       int64_t columns, T alpha_over_n, T k, T beta) {
  const int64_t plane = s.height * s.width;
  CGDP_KERNEL_LOOP(column, columns) {
    const int64_t at = column / plane * s.channels * plane + column % plane;
    lrn::across_backward_column(column_at(x, at), dy + at, dx + at, plane,
                                static_cast<int>(s.channels), static_cast<int>(s.size),
                                alpha_over_n, k, beta);
  }
}

template <typename T>
__global__ void diff_kernel(const T* x, const T* scale, const T* dy, const T* work, T* dx,
                            LrnShape s, int64_t n, T factor, T beta) {
  CGDP_KERNEL_LOOP(i, n) {
    dx[i] = dy[i] * power(scale[i], -beta) - factor * x[i] * window_sum<false>(work, i, s);
  }
}

int64_t count(const LrnShape& s) { return s.num * s.channels * s.height * s.width; }

}  // namespace

// Two passes each way: every window is read before any output is written, so top == bottom works.
template <typename T>
void lrn_forward(const T* x, T* scale, T* y, const LrnShape& s, T alpha_over_n, T k, T beta,
                 cudaStream_t stream) {
  const int64_t n = count(s);
  if (n <= 0) return;
  scale_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, scale, s, n, alpha_over_n, k);
  CUDA_CHECK_LAUNCH();
  output_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, scale, y, n, beta);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void lrn_backward(const T* x, const T* scale, const T* dy, T* work, T* dx, const LrnShape& s,
                  T alpha_over_n, T beta, cudaStream_t stream) {
  const int64_t n = count(s);
  if (n <= 0) return;
  work_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, scale, dy, work, n, beta);
  CUDA_CHECK_LAUNCH();
  const T factor = 2 * alpha_over_n * beta;
  diff_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, scale, dy, work, dx, s, n, factor, beta);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void lrn_across_forward(const T* x, T* y, const LrnShape& s, T alpha_over_n, T k, T beta,
                        cudaStream_t stream) {
  const int64_t columns = s.num * s.height * s.width;
  if (count(s) <= 0) return;
  across_forward_kernel<<<blocks_for(columns), kThreads, 0, stream>>>(x, y, s, columns,
                                                                      alpha_over_n, k, beta);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void lrn_across_backward(const T* x, const T* dy, T* dx, const LrnShape& s, T alpha_over_n, T k,
                         T beta, cudaStream_t stream) {
  const int64_t columns = s.num * s.height * s.width;
  if (count(s) <= 0) return;
  across_backward_kernel<<<blocks_for(columns), kThreads, 0, stream>>>(x, dy, dx, s, columns,
                                                                       alpha_over_n, k, beta);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void lrn_across_backward_bf16(const uint16_t* x, const T* dy, T* dx, const LrnShape& s,
                              T alpha_over_n, T k, T beta, cudaStream_t stream) {
  const int64_t columns = s.num * s.height * s.width;
  if (count(s) <= 0) return;
  across_backward_kernel<<<blocks_for(columns), kThreads, 0, stream>>>(x, dy, dx, s, columns,
                                                                       alpha_over_n, k, beta);
  CUDA_CHECK_LAUNCH();
}

template void lrn_forward<float>(const float*, float*, float*, const LrnShape&, float, float, float,
                                 cudaStream_t);
template void lrn_forward<double>(const double*, double*, double*, const LrnShape&, double, double,
                                  double, cudaStream_t);
template void lrn_backward<float>(const float*, const float*, const float*, float*, float*,
                                  const LrnShape&, float, float, cudaStream_t);
template void lrn_backward<double>(const double*, const double*, const double*, double*, double*,
                                   const LrnShape&, double, double, cudaStream_t);
template void lrn_across_forward<float>(const float*, float*, const LrnShape&, float, float, float,
                                        cudaStream_t);
template void lrn_across_forward<double>(const double*, double*, const LrnShape&, double, double,
                                         double, cudaStream_t);
template void lrn_across_backward<float>(const float*, const float*, float*, const LrnShape&, float,
                                         float, float, cudaStream_t);
template void lrn_across_backward<double>(const double*, const double*, double*, const LrnShape&,
                                          double, double, double, cudaStream_t);

template void lrn_across_backward_bf16<float>(const uint16_t*, const float*, float*,
                                              const LrnShape&, float, float, float, cudaStream_t);
template void lrn_across_backward_bf16<double>(const uint16_t*, const double*, double*,
                                               const LrnShape&, double, double, double,
                                               cudaStream_t);

}  // namespace cgdp::kernels
