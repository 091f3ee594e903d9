// The 16-bit exchange's scale: fp16's from the largest magnitude (the conversions themselves are
// half_convert.cu's).
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
  *value = ldexpf(1.f, min(15 - exponent, 127));  // as fp16_scale_for: never Inf
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

}  // namespace cgdp::kernels
