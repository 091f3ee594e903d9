// Launchers for the 16-bit exchange (src/sync/exchange_codec.cpp): gradients narrowed to bf16 or
// fp16 before their copy to the host and widened after the sum came back (half_convert.cuh), and
// fp16's scale.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "half_convert.cuh"

namespace cgdp::kernels {

// *result = max(*result, max_i |x[i]|) over [0, n); *result must start at 0 (or a smaller max).
void max_abs(const float* x, int64_t n, float* result, cudaStream_t stream);
// *value (a max |x|) becomes fp16's scale for it, as fp16_scale_for in exchange_dtype.hpp.
void fp16_scale_from_max(float* value, cudaStream_t stream);

}  // namespace cgdp::kernels
