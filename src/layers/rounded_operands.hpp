// 16-bit operands on CPUs without 16-bit kernels (issue 36): in bf16 or fp16, Convolution,
// Deconvolution and InnerProduct multiply what a tensor core would (their input, weights and
// output gradient rounded to 16 bits) with fp32 sums, by rounding copies and running their fp32
// kernels. Same numbers as a 16-bit kernel up to the order of the sums; slower than fp32 by the
// rounding passes (docs/results.md measures it). double layers never round.
#pragma once

#include <cstdint>
#include <type_traits>

#include "cgdp/device/layer_precision.hpp"

namespace cgdp {

// Which rounded copy: a layer call holds one of each at a time.
enum class Operand { kInput, kWeight };

// A rounded copy of `values` in this thread's scratch for `slot`, valid until the thread's next
// call for the same slot.
const float* rounded_copy(Operand slot, const float* values, int64_t count);

// Whether a float CPU layer without a 16-bit kernel of its own rounds its operands.
template <typename T>
bool rounds_operands() {
  return std::is_same_v<T, float> && is_16_bit(layer_precision());
}

// The same copy from values a planned net keeps in 16 bits already (Blob::packed_values):
// widened, the very values rounded_copy gives.
const float* widened_copy(Operand slot, const uint16_t* packed, int64_t count);

// `values` as the layer multiplies them: a rounded copy when rounds_operands<T>(), widened from
// `packed` when the net keeps only that.
template <typename T>
const T* operand(Operand slot, const T* values, int64_t count, const uint16_t* packed = nullptr) {
  if constexpr (std::is_same_v<T, float>)
    if (rounds_operands<T>())
      return packed ? widened_copy(slot, packed, count) : rounded_copy(slot, values, count);
  return values;
}

// Rounds values only this layer reads from now on in place: its output gradient, or a streamed
// weight's slice in the stage (inner_product_slices.cpp).
template <typename T>
void round_in_place(T* values, int64_t count) {
  if constexpr (std::is_same_v<T, float>)
    if (rounds_operands<T>()) round_to_precision(layer_precision(), values, values, count);
}

}  // namespace cgdp
