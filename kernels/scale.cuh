// Launchers for Scale: y = x * scale + bias, broadcast over a bottom viewed as outer x dim x inner.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace cgdp::kernels {

struct ScaleShape {
  int64_t outer = 0, dim = 0, inner = 0;
};

// Device scratch scale_backward needs (`scratch`), a few KiB: float64 partial sums per scale
// element and slice of the outer dimension.
int64_t scale_scratch_bytes(const ScaleShape& s);

// y = x * scale[d] + (bias ? bias[d] : 0); y may be x.
template <typename T>
void scale_forward(const T* x, const T* scale, const T* bias, const ScaleShape& s, T* y,
                   cudaStream_t stream);
// scale_diff[d] += T(sum of dy * x over d's elements), bias_diff[d] += T(sum of dy) (float64
// sums; bias_diff may be null); then, unless dx is null, dx = dy * scale[d] (dx may be dy).
template <typename T>
void scale_backward(const T* x, const T* dy, const T* scale, const ScaleShape& s, T* scale_diff,
                    T* bias_diff, T* dx, void* scratch, cudaStream_t stream);

}  // namespace cgdp::kernels
