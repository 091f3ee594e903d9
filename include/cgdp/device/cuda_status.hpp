// Why a CUDA run cannot start, in words a user can act on: the runtime's answer to "how many
// GPUs?", with the driver's and the runtime's CUDA versions. Pure, so it is tested without a GPU.
#pragma once

#include <string>

namespace cgdp {

// What cudaGetDeviceCount, cudaDriverGetVersion and cudaRuntimeGetVersion said.
struct CudaProbe {
  int error = 0;            // cudaError_t of cudaGetDeviceCount (0: success)
  std::string error_name;   // "cudaErrorInsufficientDriver"
  std::string error_text;   // its description
  int driver_version = 0;   // the CUDA version the driver supports, 1000 major + 10 minor; 0: no driver
  int runtime_version = 0;  // the runtime this cgdp was linked with
  int devices = 0;
};

// 13000 -> "13.0", 12040 -> "12.4".
std::string cuda_version_string(int version);

// Why `probe` found no usable GPU; empty when it found some.
std::string why_no_gpu(const CudaProbe& probe);

}  // namespace cgdp
