// Process-wide arithmetic of the CPU backend's layers (issue 36): fp32, or bf16 multiplies where
// a layer has them (oneDNN's convolutions so far), accumulating in fp32. Set once before nets are
// built (the trainer does, from --precision); the CUDA backend ignores it.
#pragma once

#include <string>

namespace cgdp {

enum class Precision { kFp32, kBf16 };

Precision cpu_precision();
void set_cpu_precision(Precision precision);

// "fp32" or "bf16"; UsageError naming `flag` for anything else ("fp16": not yet).
Precision parse_precision(const std::string& text, const char* flag = "--precision");
// Whether this CPU has the AVX512_BF16 instructions (oneDNN emulates bf16 without them).
bool cpu_has_bf16();

}  // namespace cgdp
