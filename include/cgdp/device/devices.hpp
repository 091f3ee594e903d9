// Choosing devices: how many GPUs there are, and a Device for a kind and index.
#pragma once

#include <memory>

#include "cgdp/device/device.hpp"

namespace cgdp {

// Number of usable CUDA GPUs; 0 without a driver, without a GPU, or in a build without CUDA.
int cuda_device_count();

// A CPU device (any index) or CUDA GPU `index`; throws DeviceError if that GPU is absent.
std::unique_ptr<Device> make_device(DeviceKind kind, int index);

}  // namespace cgdp
