// Choosing devices: how many GPUs there are, and a Device for a kind and index.
#pragma once

#include <memory>
#include <string>

#include "cgdp/device/device.hpp"

namespace cgdp {

// Names a device without opening it: what a plan or a command line refers to.
struct DeviceRef {
  DeviceKind kind = DeviceKind::Cpu;
  int index = 0;
  bool operator==(const DeviceRef&) const = default;
};

// "cpu:0", "cuda:1"
std::string to_string(const DeviceRef& device);

// Number of usable CUDA GPUs; 0 without a driver, without a GPU, or in a build without CUDA.
int cuda_device_count();
// Why no GPU can be used (no driver, a driver older than the runtime, none visible), with the
// driver's and runtime's CUDA versions; empty when cuda_device_count() > 0.
std::string cuda_unavailable_reason();
// The least free memory of any GPU (cudaMemGetInfo), in bytes; 0 without GPUs.
int64_t cuda_free_memory();

// What cuDNN's stored choices for GPU `index` are keyed by ("<name> sm_<major><minor> cuDNN
// <version>", ConvChoiceKey::gpu); empty in a build without CUDA.
std::string cuda_gpu_model(int index);

// A CPU device (any index) or CUDA GPU `index`; throws DeviceError if that GPU is absent.
// `host_numa_node` >= 0 binds a GPU's pinned host memory to that NUMA node (the GPU's own, from
// Topology); -1 leaves the placement to the OS. CPU devices ignore it.
std::unique_ptr<Device> make_device(DeviceKind kind, int index, int host_numa_node = -1);

}  // namespace cgdp
