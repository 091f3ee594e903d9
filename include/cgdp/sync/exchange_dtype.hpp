// The element type of cgdp's exchange (--exchange-dtype): gradients travel to the host and back
// as fp32, or narrowed to 16 bits on the device and widened again after the host summed them in
// fp32 and rounded the sum once. bf16 keeps fp32's exponent range; fp16 keeps 3 more mantissa
// bits and travels with a power-of-two scale per chunk, chosen so that nothing overflows.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <string>

namespace cgdp {

enum class ExchangeDtype { Fp32, Bf16, Fp16 };

// "fp32", "bf16" or "fp16"; UsageError naming --exchange-dtype otherwise.
ExchangeDtype parse_exchange_dtype(const std::string& text);
const char* to_string(ExchangeDtype dtype);
inline int element_bytes(ExchangeDtype dtype) {
  return dtype == ExchangeDtype::Fp32 ? 4 : 2;
}

// A worker's device buffers for a 16-bit exchange (cgdp_sync.cpp), which the memory estimate
// counts: its gradient's `elements` narrowed, the 16-bit sums landing, and fp16's scales both
// ways, one per chunk (never more chunks than the `param_layers` layers with parameters).
struct NarrowExchangeBytes {
  int64_t values;  // each of the two 16-bit buffers
  int64_t scales;
  int64_t total() const { return 2 * values + scales; }
};
inline NarrowExchangeBytes narrow_exchange_bytes(int64_t elements, int64_t param_layers) {
  return {elements * int64_t{sizeof(uint16_t)},
          2 * std::max<int64_t>(param_layers, 1) * int64_t{sizeof(float)}};
}

// fp32 -> bf16, rounded to nearest even; NaN stays NaN.
inline uint16_t to_bf16(float value) {
  uint32_t bits = std::bit_cast<uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}
inline float from_bf16(uint16_t value) {
  return std::bit_cast<float>(uint32_t{value} << 16);
}

// fp32 -> IEEE half, rounded to nearest even (GCC's _Float16: F16C where the target has it).
inline uint16_t to_fp16(float value) {
  return std::bit_cast<uint16_t>(static_cast<_Float16>(value));
}
inline float from_fp16(uint16_t value) {
  return static_cast<float>(std::bit_cast<_Float16>(value));
}

// fp16's scale for values of magnitude up to `max_abs`: the power of two that brings it into
// [2^14, 2^15), far below fp16's largest (65504), so that a sum of a few such values still fits
// and small ones keep their bits; 1 when max_abs is 0 or not finite (then the NaN/Inf shows).
// At most 2^127, float's largest power of two: below 2^-112 the scale would be Inf, and 0 * Inf
// would turn the chunk's zeros into NaN.
inline float fp16_scale_for(float max_abs) {
  if (!(max_abs > 0) || !std::isfinite(max_abs)) return 1.f;
  int exponent;
  std::frexp(max_abs, &exponent);  // max_abs in [2^(exponent-1), 2^exponent)
  return std::ldexp(1.f, std::min(15 - exponent, 127));
}

}  // namespace cgdp
