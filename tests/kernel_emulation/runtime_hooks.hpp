// How the device emulation (tests/device_emulation/) takes over the copies and memsets kernel
// wrappers issue, which the kernel emulator alone runs as plain memmove and memset: its checks of
// device memory then apply to them too. No CUDA types: both emulations include it.
#pragma once

#include <cstddef>

namespace cgdp_emulation {

// cudaMemcpyAsync and cudaMemsetAsync with the runtime's types erased; return cudaError_t codes.
struct RuntimeHooks {
  int (*memcpy_async)(void* dst, const void* src, size_t bytes, int kind, void* stream);
  int (*memset_async)(void* dst, int value, size_t bytes, void* stream);
};
void set_runtime_hooks(const RuntimeHooks& hooks);

}  // namespace cgdp_emulation
