// The cudaStream_t behind a cgdp::Stream of a CUDA device, for launching kernels on it.
#pragma once

#include <cuda_runtime_api.h>

#include "cgdp/device/device.hpp"

namespace cgdp {

// Throws DeviceError if `stream` belongs to another backend.
cudaStream_t native_stream(Stream& stream);

}  // namespace cgdp
