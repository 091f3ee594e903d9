// Pooling kernels: one thread per output (forward) or per input element (backward, gathering);
// MAX's argmax as each output's place in its window (layers/pool_window_code.hpp). Index
// arithmetic in 32 bits where it fits (divide): 64-bit divisions bound the backward before.
#include <cfloat>

#include "cgdp/layers/pool_window_code.hpp"
#include "launch.cuh"
#include "pooling.cuh"

namespace cgdp::kernels {

namespace {

struct Window {
  int64_t h0, h1, w0, w1, divisor;
};

// Output (ph, pw)'s window clipped to the input, and AVE's divisor (clipped to the padded input).
__device__ Window window_of(const PoolShape& s, int64_t ph, int64_t pw) {
  const int64_t h0 = ph * s.stride_h - s.pad_h, w0 = pw * s.stride_w - s.pad_w;
  const int64_t h1 = min64(h0 + s.kernel_h, s.height + s.pad_h);
  const int64_t w1 = min64(w0 + s.kernel_w, s.width + s.pad_w);
  return {max64(h0, 0), min64(h1, s.height), max64(w0, 0), min64(w1, s.width),
          (h1 - h0) * (w1 - w0)};
}

// The outputs along one axis whose windows can hold input coordinate x: [first, last).
__device__ void covering(int64_t x, int64_t pad, int64_t kernel, int64_t stride, int64_t pooled,
                         int64_t* first, int64_t* last) {
  *first = x + pad < kernel ? 0 : divide(x + pad - kernel, stride).quotient + 1;
  *last = min64(divide(x + pad, stride).quotient + 1, pooled);
}

// Output `index` as (plane, ph, pw), or input `index` as (plane, h, x), of planes of rows x cols.
struct PlaneAt {
  int64_t plane, row, col;
};
__device__ __forceinline__ PlaneAt plane_at(int64_t index, int64_t rows, int64_t cols) {
  const QuotientRemainder in_row = divide(index, cols);
  const QuotientRemainder in_plane = divide(in_row.quotient, rows);
  return {in_plane.quotient, in_plane.remainder, in_row.remainder};
}

pool::CodeGeometry geometry(const PoolShape& s) {
  return {s.width, s.kernel_h, s.kernel_w, s.stride_h, s.stride_w, s.pad_h, s.pad_w};
}

template <typename T, typename Code>
__global__ void max_forward_kernel(const T* in, T* out, Code* argmax, PoolShape s,
                                   pool::CodeGeometry g, int64_t n) {
  CGDP_KERNEL_LOOP(index, n) {
    const PlaneAt at_out = plane_at(index, s.pooled_h, s.pooled_w);
    const int64_t ph = at_out.row, pw = at_out.col;
    const T* plane = in + at_out.plane * s.height * s.width;
    const Window w = window_of(s, ph, pw);
    T best = sizeof(T) == sizeof(float) ? T(-FLT_MAX) : T(-DBL_MAX);
    Code at = pool::kNone<Code>;
    for (int64_t h = w.h0; h < w.h1; ++h)
      for (int64_t x = w.w0; x < w.w1; ++x)
        if (plane[h * s.width + x] > best)
          best = plane[h * s.width + x], at = pool::encode<Code>(h, x, ph, pw, g);
    out[index] = best;
    if (argmax) argmax[index] = at;
  }
}

template <typename T>
__global__ void ave_forward_kernel(const T* in, T* out, PoolShape s, int64_t n) {
  CGDP_KERNEL_LOOP(index, n) {
    const PlaneAt at_out = plane_at(index, s.pooled_h, s.pooled_w);
    const int64_t ph = at_out.row, pw = at_out.col;
    const T* plane = in + at_out.plane * s.height * s.width;
    const Window w = window_of(s, ph, pw);
    T sum = 0;
    for (int64_t h = w.h0; h < w.h1; ++h)
      for (int64_t x = w.w0; x < w.w1; ++x) sum += plane[h * s.width + x];
    out[index] = sum / static_cast<T>(w.divisor);
  }
}

template <typename T, bool kMax, typename Code>
__global__ void backward_kernel(const T* out_diff, const Code* argmax, T* in_diff, PoolShape s,
                                pool::CodeGeometry g, int64_t n) {
  CGDP_KERNEL_LOOP(index, n) {
    const PlaneAt at_in = plane_at(index, s.height, s.width);
    const int64_t h = at_in.row, x = at_in.col;
    const int64_t offset = at_in.plane * s.pooled_h * s.pooled_w;
    int64_t ph0, ph1, pw0, pw1;
    covering(h, s.pad_h, s.kernel_h, s.stride_h, s.pooled_h, &ph0, &ph1);
    covering(x, s.pad_w, s.kernel_w, s.stride_w, s.pooled_w, &pw0, &pw1);
    T gradient = 0;
    for (int64_t ph = ph0; ph < ph1; ++ph)
      for (int64_t pw = pw0; pw < pw1; ++pw) {
        const int64_t o = offset + ph * s.pooled_w + pw;
        if (kMax) {
          if (argmax[o] == pool::encode<Code>(h, x, ph, pw, g)) gradient += out_diff[o];
        } else {
          const Window w = window_of(s, ph, pw);
          if (h >= w.h0 && h < w.h1 && x >= w.w0 && x < w.w1)
            gradient += out_diff[o] / static_cast<T>(w.divisor);
        }
      }
    in_diff[index] = gradient;
  }
}

int64_t outputs(const PoolShape& s) { return s.planes * s.pooled_h * s.pooled_w; }
int64_t inputs(const PoolShape& s) { return s.planes * s.height * s.width; }

}  // namespace

template <typename T, typename Code>
void max_pool_forward(const T* in, T* out, Code* argmax, const PoolShape& s, cudaStream_t stream) {
  const int64_t n = outputs(s);
  if (n <= 0) return;
  max_forward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(in, out, argmax, s, geometry(s), n);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void ave_pool_forward(const T* in, T* out, const PoolShape& s, cudaStream_t stream) {
  const int64_t n = outputs(s);
  if (n <= 0) return;
  ave_forward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(in, out, s, n);
  CUDA_CHECK_LAUNCH();
}

template <typename T, typename Code>
void max_pool_backward(const T* out_diff, const Code* argmax, T* in_diff, const PoolShape& s,
                       cudaStream_t stream) {
  const int64_t n = inputs(s);
  if (n <= 0) return;
  backward_kernel<T, true, Code>
      <<<blocks_for(n), kThreads, 0, stream>>>(out_diff, argmax, in_diff, s, geometry(s), n);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void ave_pool_backward(const T* out_diff, T* in_diff, const PoolShape& s, cudaStream_t stream) {
  const int64_t n = inputs(s);
  if (n <= 0) return;
  backward_kernel<T, false, uint8_t>
      <<<blocks_for(n), kThreads, 0, stream>>>(out_diff, nullptr, in_diff, s, geometry(s), n);
  CUDA_CHECK_LAUNCH();
}

#define CGDP_INSTANTIATE_MAX(T, Code)                                                           \
  template void max_pool_forward<T, Code>(const T*, T*, Code*, const PoolShape&, cudaStream_t); \
  template void max_pool_backward<T, Code>(const T*, const Code*, T*, const PoolShape&,         \
                                           cudaStream_t);
#define CGDP_INSTANTIATE(T)                                                        \
  CGDP_INSTANTIATE_MAX(T, uint8_t)                                                 \
  CGDP_INSTANTIATE_MAX(T, uint16_t)                                                \
  CGDP_INSTANTIATE_MAX(T, uint32_t)                                                \
  template void ave_pool_forward<T>(const T*, T*, const PoolShape&, cudaStream_t); \
  template void ave_pool_backward<T>(const T*, T*, const PoolShape&, cudaStream_t);
CGDP_INSTANTIATE(float)
CGDP_INSTANTIATE(double)
#undef CGDP_INSTANTIATE
#undef CGDP_INSTANTIATE_MAX

}  // namespace cgdp::kernels
