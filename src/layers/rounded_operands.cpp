// Per-thread scratch for rounded operands: CPU workers run their layers on threads of their own,
// one layer call at a time, so a thread's buffers serve every layer it runs.
#include "layers/rounded_operands.hpp"

#include <vector>

namespace cgdp {

namespace {

float* scratch_for(Operand slot, int64_t count) {
  thread_local std::vector<float> scratch[2];
  std::vector<float>& buffer = scratch[static_cast<int>(slot)];
  if (buffer.size() < static_cast<size_t>(count)) buffer.resize(static_cast<size_t>(count));
  return buffer.data();
}

}  // namespace

const float* rounded_copy(Operand slot, const float* values, int64_t count) {
  float* copy = scratch_for(slot, count);
  round_to_precision(layer_precision(), values, copy, count);
  return copy;
}

const float* widened_copy(Operand slot, const uint16_t* packed, int64_t count) {
  float* copy = scratch_for(slot, count);
  widen_from_precision(layer_precision(), packed, copy, count);
  return copy;
}

}  // namespace cgdp
