// fp32 <-> bf16/fp16 elementwise, rounded to nearest even (the hardware's conversions).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "half_convert.cuh"
#include "launch.cuh"

namespace cgdp::kernels {

namespace {

__device__ __forceinline__ uint16_t to_half(float v, Half16 type) {
  return type == Half16::Bf16 ? __bfloat16_as_ushort(__float2bfloat16_rn(v))
                              : __half_as_ushort(__float2half_rn(v));
}

__device__ __forceinline__ float from_half(uint16_t v, Half16 type) {
  return type == Half16::Bf16 ? __bfloat162float(__ushort_as_bfloat16(v))
                              : __half2float(__ushort_as_half(v));
}

__global__ void narrow_kernel(const float* src, uint16_t* dst, int64_t n, Half16 type,
                              const float* scale) {
  const float s = scale ? *scale : 1.f;
  CGDP_KERNEL_LOOP(i, n) {
    dst[i] = to_half(src[i] * s, type);
  }
}

__global__ void widen_kernel(const uint16_t* src, float* dst, int64_t n, Half16 type,
                             const float* scale) {
  const float s = scale ? *scale : 1.f;
  CGDP_KERNEL_LOOP(i, n) {
    dst[i] = from_half(src[i], type) / s;
  }
}

__global__ void widen_add_kernel(const uint16_t* src, float* dst, int64_t n, Half16 type) {
  CGDP_KERNEL_LOOP(i, n) {
    dst[i] += from_half(src[i], type);
  }
}

__global__ void round_kernel(const float* src, float* dst, int64_t n, Half16 type) {
  CGDP_KERNEL_LOOP(i, n) {
    dst[i] = from_half(to_half(src[i], type), type);
  }
}

}  // namespace

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

void widen_add(const uint16_t* src, float* dst, int64_t n, Half16 type, cudaStream_t stream) {
  if (n <= 0) return;
  widen_add_kernel<<<blocks_for(n), kThreads, 0, stream>>>(src, dst, n, type);
  CUDA_CHECK_LAUNCH();
}

void round_to_half(const float* src, float* dst, int64_t n, Half16 type, cudaStream_t stream) {
  if (n <= 0) return;
  round_kernel<<<blocks_for(n), kThreads, 0, stream>>>(src, dst, n, type);
  CUDA_CHECK_LAUNCH();
}

}  // namespace cgdp::kernels
