// CUDA_CHECK's error path for the kernel emulator's own test (src/cuda/cuda_check.cpp words it
// the same way), apart from emulated_cuda.cpp: the device emulation links cgdp's own instead.
#include "cgdp/core/error.hpp"
#include "cuda/cuda_check.hpp"

namespace cgdp {

void throw_cuda_error(const char* call, const char* what, const char* file, int line) {
  throw DeviceError(cat("cuda:emulated: ", call, " failed: ", what, " (", file, ":", line, ")"));
}

}  // namespace cgdp
