// Device factory; the CUDA half lives in src/cuda/ and is linked only in CUDA builds.
#include "cgdp/device/devices.hpp"

#include "cgdp/core/error.hpp"
#include "cgdp/device/cpu_device.hpp"
#include "cgdp/device/cuda_status.hpp"

namespace cgdp {

#ifdef CGDP_HAVE_CUDA
std::unique_ptr<Device> make_cuda_device(int index, int numa_node);  // src/cuda/cuda_device.cpp
const CudaProbe& probe_cuda();
int count_cuda_devices();
int64_t cuda_free_memory_bytes();
std::string gpu_model(int device);  // src/cuda/conv_algorithms.cpp
static std::string why_no_cuda() { return why_no_gpu(probe_cuda()); }
#else
static std::unique_ptr<Device> make_cuda_device(int index, int) {
  throw DeviceError(cat("cuda:", index, ": this cgdp was built without CUDA"));
}
static int count_cuda_devices() { return 0; }
static int64_t cuda_free_memory_bytes() { return 0; }
static std::string gpu_model(int) {
  return "";
}
static std::string why_no_cuda() { return "this cgdp was built without CUDA"; }
#endif

std::string to_string(const DeviceRef& device) {
  return cat(to_string(device.kind), ":", device.index);
}

int cuda_device_count() { return count_cuda_devices(); }

std::string cuda_unavailable_reason() { return why_no_cuda(); }

int64_t cuda_free_memory() { return cuda_free_memory_bytes(); }

std::string cuda_gpu_model(int index) {
  return gpu_model(index);
}

std::unique_ptr<Device> make_device(DeviceKind kind, int index, int host_numa_node) {
  if (kind == DeviceKind::Cpu) return std::make_unique<CpuDevice>(index);
  const int n = cuda_device_count();
  if (n == 0) throw DeviceError(cat("cuda:", index, ": ", cuda_unavailable_reason()));
  if (index < 0 || index >= n) throw DeviceError(cat("cuda:", index, ": no such GPU (", n, " found)"));
  return make_cuda_device(index, host_numa_node);
}

}  // namespace cgdp
