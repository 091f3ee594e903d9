// Process-wide arithmetic of the multiplying layers (issue 36): fp32, or 16-bit operands (bf16 or
// fp16) with fp32 sums, as a tensor core multiplies. Set once before nets are built (the trainer
// does, from --precision); CPU and CUDA layers read it.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

namespace cgdp {

enum class Precision { kFp32, kBf16, kFp16 };

Precision layer_precision();
void set_layer_precision(Precision precision);
inline bool is_16_bit(Precision p) {
  return p != Precision::kFp32;
}

// Whether a layer of T multiplies in 16 bits: float layers under a 16-bit layer_precision().
template <typename T>
bool multiplies_in_half() {
  return std::is_same_v<T, float> && is_16_bit(layer_precision());
}

// Whether rounding to `p` keeps every value's side of zero, which a ReLU's mask reads: bf16 rounds
// to zero only fp32's subnormals below 2^-133, fp16 every magnitude below 2^-25 (VGG-16's millions
// of outputs hold some).
inline bool keeps_signs(Precision p) {
  return p != Precision::kFp16;
}

// Sets layer_precision() for a scope (a command that estimates a run in another precision).
class ScopedLayerPrecision {
 public:
  explicit ScopedLayerPrecision(Precision precision) : before_(layer_precision()) {
    set_layer_precision(precision);
  }
  ~ScopedLayerPrecision() { set_layer_precision(before_); }
  ScopedLayerPrecision(const ScopedLayerPrecision&) = delete;
  ScopedLayerPrecision& operator=(const ScopedLayerPrecision&) = delete;

 private:
  Precision before_;
};

// "fp32", "bf16" or "fp16".
const char* to_string(Precision precision);
// The inverse of to_string; UsageError naming `flag` for anything else.
Precision parse_precision(const std::string& text, const char* flag = "--precision");
// Whether this CPU has the AVX512_BF16 instructions (oneDNN's bf16 convolutions need them).
bool cpu_has_bf16();

// Rounds `count` values to the nearest `precision` number (ties to even; beyond fp16's range to
// infinity) and widens them back to float into `out`, which may be `in`. fp32 copies.
void round_to_precision(Precision precision, const float* in, float* out, int64_t count);
// The same rounding kept in 16 bits (bf16 or fp16 bit patterns), and the exact widening back:
// widen(narrow(x)) == round_to_precision(x). For 16-bit precisions only.
void narrow_to_precision(Precision precision, const float* in, uint16_t* out, int64_t count);
void widen_from_precision(Precision precision, const uint16_t* in, float* out, int64_t count);
// narrow_to_precision, but a nonzero value that would round to zero keeps its sign as the
// smallest 16-bit number of that sign: a copy read only for its signs (a ReLU's mask), exact
// in fp16 too (keeps_signs).
void narrow_keeping_signs(Precision precision, const float* in, uint16_t* out, int64_t count);
// The bits of +infinity in a 16-bit precision: a 16-bit number widens to a value > 0 exactly when
// its bits are 1 to these (read_positive).
inline uint16_t infinity_bits(Precision precision) {
  return precision == Precision::kFp16 ? 0x7C00 : 0x7F80;
}
inline bool read_positive(uint16_t bits, uint16_t infinity) {
  return static_cast<uint16_t>(bits - 1) < infinity;
}

// Bytes of the 16-bit copies one multiplying CUDA layer call holds: its input, output and weights
// (elements), each from a 256-byte boundary. cuda/half_operands.hpp carves them; the memory
// estimate counts them.
int64_t half_operand_bytes(int64_t input, int64_t output, int64_t weights);

}  // namespace cgdp
