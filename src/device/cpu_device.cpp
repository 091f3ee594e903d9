// CPU device: 64-byte-aligned host memory (pinned memory is the same thing on this backend).
#include "cgdp/device/cpu_device.hpp"

#include <cstdlib>
#include <cstring>
#include <new>

#include "cgdp/core/error.hpp"
#include "cpu_stream.hpp"

namespace cgdp {

namespace {

void* aligned_zeroed(size_t bytes, const std::string& device) {
  const size_t rounded = (bytes + 63) / 64 * 64;
  void* ptr = std::aligned_alloc(64, rounded);
  if (!ptr) throw DeviceError(cat(device, ": cannot allocate ", bytes, " bytes"));
  std::memset(ptr, 0, rounded);
  return ptr;
}

}  // namespace

std::string CpuDevice::name() const { return cat("cpu:", index_); }

std::unique_ptr<Stream> CpuDevice::create_stream(const std::string& name) {
  return std::make_unique<CpuStream>(name, this->name(), copy_budget_);
}

std::unique_ptr<Event> CpuDevice::create_event() { return std::make_unique<CpuEvent>(); }

void* CpuDevice::allocate(size_t bytes) {
  void* ptr = aligned_zeroed(bytes, name());
  count_device_alloc(static_cast<int64_t>(bytes));
  return ptr;
}

void CpuDevice::deallocate(void* ptr, size_t bytes) {
  std::free(ptr);
  count_device_alloc(-static_cast<int64_t>(bytes));
}

void* CpuDevice::allocate_pinned(size_t bytes) {
  void* ptr = aligned_zeroed(bytes, name());
  count_pinned_alloc(static_cast<int64_t>(bytes));
  return ptr;
}

void CpuDevice::deallocate_pinned(void* ptr, size_t bytes) {
  std::free(ptr);
  count_pinned_alloc(-static_cast<int64_t>(bytes));
}

void CpuDevice::copy(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }

CpuDevice& default_cpu_device() {
  static CpuDevice device(0);
  return device;
}

}  // namespace cgdp
