// The CUDA backend's process-wide settings (plain data; read by src/layers/*_cuda.cpp).
#include "cgdp/device/cuda_options.hpp"

namespace cgdp {

namespace {

CudaOptions& options() {
  static CudaOptions value;
  return value;
}

}  // namespace

const CudaOptions& cuda_options() { return options(); }

void set_cuda_options(const CudaOptions& value) { options() = value; }

}  // namespace cgdp
