// Byte accounting and the RAII buffers shared by every backend.
#include "cgdp/device/device.hpp"

namespace cgdp {

const char* to_string(DeviceKind kind) { return kind == DeviceKind::Cpu ? "cpu" : "cuda"; }

MemoryStats Device::memory_stats() const {
  return {device_bytes_.load(), device_peak_bytes_.load(), pinned_bytes_.load()};
}

void Device::count_device_alloc(int64_t bytes) {
  const int64_t now = device_bytes_.fetch_add(bytes) + bytes;
  int64_t peak = device_peak_bytes_.load();
  while (now > peak && !device_peak_bytes_.compare_exchange_weak(peak, now)) {
  }
}

void Device::count_pinned_alloc(int64_t bytes) { pinned_bytes_.fetch_add(bytes); }

}  // namespace cgdp
