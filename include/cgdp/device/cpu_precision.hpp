// Process-wide arithmetic of the CPU backend's multiplying layers (issue 36): fp32, or 16-bit
// operands (bf16 or fp16) with fp32 sums, as a tensor core multiplies. Set once before nets are
// built (the trainer does, from --precision); the CUDA backend ignores it.
#pragma once

#include <cstdint>
#include <string>

namespace cgdp {

enum class Precision { kFp32, kBf16, kFp16 };

Precision cpu_precision();
void set_cpu_precision(Precision precision);
inline bool is_16_bit(Precision p) {
  return p != Precision::kFp32;
}

// "fp32", "bf16" or "fp16".
const char* to_string(Precision precision);
// The inverse of to_string; UsageError naming `flag` for anything else.
Precision parse_precision(const std::string& text, const char* flag = "--precision");
// Whether this CPU has the AVX512_BF16 instructions (oneDNN's bf16 convolutions need them).
bool cpu_has_bf16();

// Rounds `count` values to the nearest `precision` number (ties to even; beyond fp16's range to
// infinity) and widens them back to float into `out`, which may be `in`. fp32 copies.
void round_to_precision(Precision precision, const float* in, float* out, int64_t count);

}  // namespace cgdp
