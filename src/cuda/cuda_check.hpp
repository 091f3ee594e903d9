// CUDA_CHECK: names the call, the device and file:line, and throws DeviceError (never aborts);
// CUDA_CHECK_LAUNCH() after every kernel launch. Plain C++17 with the CUDA runtime only, so
// kernels/*.cu include it too; cuDNN's and cuBLAS's checks are in cuda_libraries.hpp.
#pragma once

#include <cuda_runtime_api.h>

namespace cgdp {

// Throws DeviceError "cuda:<current device>: <call> failed: <what> (<file>:<line>)".
[[noreturn]] void throw_cuda_error(const char* call, const char* what, const char* file, int line);

}  // namespace cgdp

#define CUDA_CHECK(call)                                                                        \
  do {                                                                                          \
    const cudaError_t cgdp_status_ = (call);                                                    \
    if (cgdp_status_ != cudaSuccess)                                                            \
      ::cgdp::throw_cuda_error(#call, cudaGetErrorString(cgdp_status_), __FILE__, __LINE__);    \
  } while (0)

// After a kernel launch: reports a bad launch configuration (or an earlier asynchronous error)
// at the launch site.
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())
