// PCI bus ids of the CUDA GPUs, which hwloc needs to tell which CPUs and NUMA node each is near.
#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "cuda_check.hpp"

namespace cgdp {

int count_cuda_devices();  // cuda_device.cpp

std::vector<std::string> cuda_pci_bus_ids() {
  std::vector<std::string> ids;
  for (int i = 0, n = count_cuda_devices(); i < n; ++i) {
    char id[32] = {};  // "0000:65:00.0"; 13 characters suffice, CUDA asks for room to spare
    CUDA_CHECK(cudaDeviceGetPCIBusId(id, sizeof id, i));
    ids.emplace_back(id);
  }
  return ids;
}

}  // namespace cgdp
