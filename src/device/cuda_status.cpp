// Messages for a CUDA runtime that finds no usable GPU (see cuda_status.hpp).
#include "cgdp/device/cuda_status.hpp"

#include "cgdp/core/error.hpp"

namespace cgdp {

namespace {
// cudaError_t values (driver_types.h), here without the CUDA headers.
constexpr int kInsufficientDriver = 35;
constexpr int kNoDevice = 100;
}  // namespace

std::string cuda_version_string(int version) {
  return cat(version / 1000, ".", version % 1000 / 10);
}

std::string why_no_gpu(const CudaProbe& p) {
  if (p.error == 0 && p.devices > 0) return {};
  const std::string runtime = cuda_version_string(p.runtime_version);
  if (p.driver_version == 0)
    return cat("no CUDA driver is installed (libcuda.so not found; this cgdp's CUDA runtime is ", runtime, ")");
  const std::string versions = cat("driver for CUDA ", cuda_version_string(p.driver_version), ", runtime ", runtime);
  if (p.error == 0 || p.error == kNoDevice)
    return cat("the CUDA driver sees no GPU (", versions, "; check nvidia-smi and CUDA_VISIBLE_DEVICES)");
  if (p.error == kInsufficientDriver)
    return cat("the CUDA driver supports CUDA ", cuda_version_string(p.driver_version), " but this cgdp's runtime is ",
               runtime, ": install a newer driver, or build cgdp with a CUDA toolkit the driver supports");
  return cat("the CUDA runtime cannot use the GPUs: ", p.error_name, " (", p.error_text, "; ", versions, ")");
}

}  // namespace cgdp
