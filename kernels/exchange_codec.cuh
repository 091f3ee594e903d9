// Launchers for the 16-bit exchange (src/sync/exchange_codec.cpp): gradients narrowed to bf16 or
// fp16 before their copy to the host, widened again after the sum came back.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace cgdp::kernels {

enum class Half16 { Bf16, Fp16 };

// *result = max(*result, max_i |x[i]|) over [0, n); *result must start at 0 (or a smaller max).
void max_abs(const float* x, int64_t n, float* result, cudaStream_t stream);
// *value (a max |x|) becomes fp16's scale for it, as fp16_scale_for in exchange_dtype.hpp.
void fp16_scale_from_max(float* value, cudaStream_t stream);
// dst[i] = narrow(src[i] * *scale) (scale null: 1), rounded to nearest even.
void narrow(const float* src, uint16_t* dst, int64_t n, Half16 type, const float* scale,
            cudaStream_t stream);
// dst[i] = widen(src[i]) / *scale (scale null: 1).
void widen(const uint16_t* src, float* dst, int64_t n, Half16 type, const float* scale,
           cudaStream_t stream);

}  // namespace cgdp::kernels
