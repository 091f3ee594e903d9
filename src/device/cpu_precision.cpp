// The CPU backend's precision setting (plain data; read by the layers that have a bf16 path).
#include "cgdp/device/cpu_precision.hpp"

#include "cgdp/core/error.hpp"

namespace cgdp {

namespace {

Precision& setting() {
  static Precision value = Precision::kFp32;
  return value;
}

}  // namespace

Precision cpu_precision() {
  return setting();
}

void set_cpu_precision(Precision precision) {
  setting() = precision;
}

Precision parse_precision(const std::string& text, const char* flag) {
  if (text == "fp32") return Precision::kFp32;
  if (text == "bf16") return Precision::kBf16;
  if (text == "fp16") throw UsageError(cat(flag, " fp16: not yet (bf16 on the CPU, or fp32)"));
  throw UsageError(cat(flag, " ", text, ": expected fp32 or bf16"));
}

bool cpu_has_bf16() {
  return __builtin_cpu_supports("avx512bf16");
}

}  // namespace cgdp
