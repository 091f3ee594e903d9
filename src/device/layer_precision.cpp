// The layers' precision setting and the rounding that gives a 16-bit operand's value.
#include "cgdp/device/layer_precision.hpp"

#include <bit>
#include <cstring>

#include "cgdp/core/error.hpp"

namespace cgdp {

namespace {

Precision& setting() {
  static Precision value = Precision::kFp32;
  return value;
}

// bfloat16 is float's top half: add half an ulp of the kept part (less one when the kept part
// is even, for ties to even) and cut. Inf is cut as it is; a NaN is quieted first, since one whose
// payload is all in the low half would be cut to Inf. Selects, not branches: the loops vectorise.
float round_to_bf16(float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  const bool special = (bits & 0x7f800000u) == 0x7f800000u;
  const bool nan = (bits & 0x7fffffffu) > 0x7f800000u;
  const uint32_t rounded = bits + 0x7fffu + ((bits >> 16) & 1u);
  const uint32_t kept = nan ? bits | 0x00400000u : bits;
  return std::bit_cast<float>((special ? kept : rounded) & 0xffff0000u);
}

uint16_t bf16_bits(float x) {
  return static_cast<uint16_t>(std::bit_cast<uint32_t>(round_to_bf16(x)) >> 16);
}
uint16_t fp16_bits(float x) {  // the compiler's conversion: to nearest even
  return std::bit_cast<uint16_t>(static_cast<_Float16>(x));
}

// A nonzero x whose 16 bits h rounded to zero: the smallest 16-bit number of its sign instead.
uint16_t keeping_sign(float x, uint16_t h) {
  return (h & 0x7FFF) == 0 && x != 0.f ? (x > 0.f ? 0x0001 : 0x8001) : h;
}

}  // namespace

Precision layer_precision() {
  return setting();
}

void set_layer_precision(Precision precision) {
  setting() = precision;
}

const char* to_string(Precision precision) {
  switch (precision) {
    case Precision::kFp32:
      return "fp32";
    case Precision::kBf16:
      return "bf16";
    case Precision::kFp16:
      return "fp16";
  }
  return "?";
}

Precision parse_precision(const std::string& text, const char* flag) {
  for (Precision p : {Precision::kFp32, Precision::kBf16, Precision::kFp16})
    if (text == to_string(p)) return p;
  throw UsageError(cat(flag, " ", text, ": expected fp32, bf16 or fp16"));
}

bool cpu_has_bf16() {
  return __builtin_cpu_supports("avx512bf16");
}

void round_to_precision(Precision precision, const float* in, float* out, int64_t count) {
  switch (precision) {
    case Precision::kFp32:
      if (in != out) std::memmove(out, in, static_cast<size_t>(count) * sizeof(float));
      return;
    case Precision::kBf16:
#pragma omp parallel for simd schedule(static) if (count > (1 << 16))
      for (int64_t i = 0; i < count; ++i) out[i] = round_to_bf16(in[i]);
      return;
    case Precision::kFp16:  // the compiler's conversion rounds to nearest even (F16C where built
                            // for it)
#pragma omp parallel for simd schedule(static) if (count > (1 << 16))
      for (int64_t i = 0; i < count; ++i) out[i] = static_cast<float>(static_cast<_Float16>(in[i]));
      return;
  }
}

void narrow_to_precision(Precision precision, const float* in, uint16_t* out, int64_t count) {
  CGDP_ASSERT(is_16_bit(precision));
  if (precision == Precision::kBf16) {
#pragma omp parallel for simd schedule(static) if (count > (1 << 16))
    for (int64_t i = 0; i < count; ++i) out[i] = bf16_bits(in[i]);
    return;
  }
#pragma omp parallel for simd schedule(static) if (count > (1 << 16))
  for (int64_t i = 0; i < count; ++i) out[i] = fp16_bits(in[i]);
}

// One pass, as narrow_to_precision's: a pack is taken every iteration.
void narrow_keeping_signs(Precision precision, const float* in, uint16_t* out, int64_t count) {
  CGDP_ASSERT(is_16_bit(precision));
  if (precision == Precision::kBf16) {
#pragma omp parallel for simd schedule(static) if (count > (1 << 16))
    for (int64_t i = 0; i < count; ++i) out[i] = keeping_sign(in[i], bf16_bits(in[i]));
    return;
  }
#pragma omp parallel for simd schedule(static) if (count > (1 << 16))
  for (int64_t i = 0; i < count; ++i) out[i] = keeping_sign(in[i], fp16_bits(in[i]));
}

void widen_from_precision(Precision precision, const uint16_t* in, float* out, int64_t count) {
  CGDP_ASSERT(is_16_bit(precision));
  if (precision == Precision::kBf16) {
#pragma omp parallel for simd schedule(static) if (count > (1 << 16))
    for (int64_t i = 0; i < count; ++i) out[i] = std::bit_cast<float>(uint32_t{in[i]} << 16);
    return;
  }
#pragma omp parallel for simd schedule(static) if (count > (1 << 16))
  for (int64_t i = 0; i < count; ++i) out[i] = static_cast<float>(std::bit_cast<_Float16>(in[i]));
}

int64_t half_operand_bytes(int64_t input, int64_t output, int64_t weights) {
  const auto aligned = [](int64_t elements) { return (elements * 2 + 255) / 256 * 256; };
  return aligned(input) + aligned(output) + aligned(weights);
}

}  // namespace cgdp
