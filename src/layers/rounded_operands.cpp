// Per-thread scratch for rounded operands: CPU workers run their layers on threads of their own,
// one layer call at a time, so a thread's buffers serve every layer it runs.
#include "layers/rounded_operands.hpp"

#include <vector>

namespace cgdp {

const float* rounded_copy(Operand slot, const float* values, int64_t count) {
  thread_local std::vector<float> scratch[2];
  std::vector<float>& buffer = scratch[static_cast<int>(slot)];
  if (buffer.size() < static_cast<size_t>(count)) buffer.resize(static_cast<size_t>(count));
  round_to_precision(layer_precision(), values, buffer.data(), count);
  return buffer.data();
}

}  // namespace cgdp
