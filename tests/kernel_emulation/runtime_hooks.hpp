// How the device emulation (tests/device_emulation/) takes over the copies and memsets kernel
// wrappers issue, which the kernel emulator alone runs as plain memmove and memset, and where a
// launch runs: its checks of device memory then apply to them too, and its streams order them.
// No CUDA types: both emulations include it.
#pragma once

#include <cstddef>
#include <functional>

namespace cgdp_emulation {

// cudaMemcpyAsync and cudaMemsetAsync with the runtime's types erased; return cudaError_t codes.
// run_on_stream: a launch's work, after what its stream holds (unset: the work runs at once).
struct RuntimeHooks {
  int (*memcpy_async)(void* dst, const void* src, size_t bytes, int kind, void* stream);
  int (*memset_async)(void* dst, int value, size_t bytes, void* stream);
  void (*run_on_stream)(void* stream, std::function<void()> work);
};
void set_runtime_hooks(const RuntimeHooks& hooks);

}  // namespace cgdp_emulation
