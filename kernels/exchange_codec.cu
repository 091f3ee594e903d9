// The 16-bit exchange's conversions: elementwise narrowing and widening with an optional scale
// read on the device, and fp16's scale from the largest magnitude.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "exchange_codec.cuh"
#include "launch.cuh"

namespace cgdp::kernels {

namespace {

// The max as an int: non-negative floats order as their bits. NaNs are passed over (they travel
// as NaN whatever the scale, and the trainer's loss check names them).
__global__ void max_abs_kernel(const float* x, int64_t n, float* result) {
  float local = 0.f;
  CGDP_KERNEL_LOOP(i, n) { local = fmaxf(local, fabsf(x[i])); }
  atomicMax(reinterpret_cast<int*>(result), __float_as_int(local));
}

__global__ void fp16_scale_kernel(float* value) {
  const float m = *value;
  if (!(m > 0.f) || isinf(m) || isnan(m)) {
    *value = 1.f;
    return;
  }
  int exponent;
  frexpf(m, &exponent);
  *value = ldexpf(1.f, 15 - exponent);
}

__global__ void narrow_kernel(const float* src, uint16_t* dst, int64_t n, Half16 type,
                              const float* scale) {
  const float s = scale ? *scale : 1.f;
  CGDP_KERNEL_LOOP(i, n) {
    const float v = src[i] * s;
    dst[i] = type == Half16::Bf16 ? __bfloat16_as_ushort(__float2bfloat16_rn(v))
                                  : __half_as_ushort(__float2half_rn(v));
  }
}

__global__ void widen_kernel(const uint16_t* src, float* dst, int64_t n, Half16 type,
                             const float* scale) {
  const float s = scale ? *scale : 1.f;
  CGDP_KERNEL_LOOP(i, n) {
    const float v = type == Half16::Bf16 ? __bfloat162float(__ushort_as_bfloat16(src[i]))
                                         : __half2float(__ushort_as_half(src[i]));
    dst[i] = v / s;
  }
}

}  // namespace

void max_abs(const float* x, int64_t n, float* result, cudaStream_t stream) {
  if (n <= 0) return;
  max_abs_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, n, result);
  CUDA_CHECK_LAUNCH();
}

void fp16_scale_from_max(float* value, cudaStream_t stream) {
  fp16_scale_kernel<<<1, 1, 0, stream>>>(value);
  CUDA_CHECK_LAUNCH();
}

void narrow(const float* src, uint16_t* dst, int64_t n, Half16 type, const float* scale,
            cudaStream_t stream) {
  if (n <= 0) return;
  narrow_kernel<<<blocks_for(n), kThreads, 0, stream>>>(src, dst, n, type, scale);
  CUDA_CHECK_LAUNCH();
}

void widen(const uint16_t* src, float* dst, int64_t n, Half16 type, const float* scale,
           cudaStream_t stream) {
  if (n <= 0) return;
  widen_kernel<<<blocks_for(n), kThreads, 0, stream>>>(src, dst, n, type, scale);
  CUDA_CHECK_LAUNCH();
}

}  // namespace cgdp::kernels
