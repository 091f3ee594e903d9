// CUDA_CHECK: names the call, file:line and device, and throws DeviceError (never aborts).
#pragma once

#include <cuda_runtime.h>

#include "cgdp/core/error.hpp"

namespace cgdp {

inline int current_cuda_device() {
  int device = -1;
  cudaGetDevice(&device);
  return device;
}

}  // namespace cgdp

#define CUDA_CHECK(call)                                                                       \
  do {                                                                                         \
    const cudaError_t cgdp_status_ = (call);                                                   \
    if (cgdp_status_ != cudaSuccess)                                                           \
      throw ::cgdp::DeviceError(::cgdp::cat("cuda:", ::cgdp::current_cuda_device(), ": ", #call, \
                                            " failed: ", cudaGetErrorString(cgdp_status_),     \
                                            " (", __FILE__, ":", __LINE__, ")"));              \
  } while (0)

// After a kernel launch: reports a bad launch configuration at the launch site.
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())
