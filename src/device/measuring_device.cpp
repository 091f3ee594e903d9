// MeasuringDevice: anonymous mappings that reserve no swap, so a 10 GB net costs page tables only.
#include "cgdp/device/measuring_device.hpp"

#include <sys/mman.h>

#include "cgdp/core/error.hpp"

namespace cgdp {

namespace {

void* reserve(size_t bytes) {
  if (bytes == 0) return nullptr;
  void* ptr = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (ptr == MAP_FAILED)
    throw Error(cat("a single buffer of ", bytes, " bytes is more than this machine can address"));
  return ptr;
}

void release(void* ptr, size_t bytes) {
  if (ptr) ::munmap(ptr, bytes);
}

}  // namespace

std::unique_ptr<Stream> MeasuringDevice::create_stream(const std::string& name) {
  throw Error(cat("measuring device: no stream '", name, "' (it only counts allocations)"));
}

std::unique_ptr<Event> MeasuringDevice::create_event() {
  throw Error("measuring device: no events (it only counts allocations)");
}

void* MeasuringDevice::allocate(size_t bytes) {
  void* ptr = reserve(bytes);
  count_device_alloc(static_cast<int64_t>(bytes));
  return ptr;
}

void MeasuringDevice::deallocate(void* ptr, size_t bytes) {
  release(ptr, bytes);
  count_device_alloc(-static_cast<int64_t>(bytes));
}

void* MeasuringDevice::allocate_pinned(size_t bytes) {
  void* ptr = reserve(bytes);
  count_pinned_alloc(static_cast<int64_t>(bytes));
  return ptr;
}

void MeasuringDevice::deallocate_pinned(void* ptr, size_t bytes) {
  release(ptr, bytes);
  count_pinned_alloc(-static_cast<int64_t>(bytes));
}

}  // namespace cgdp
