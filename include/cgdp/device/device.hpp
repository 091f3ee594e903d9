// The device interface: memory with byte accounting, streams, events, async copies and host
// callbacks. The CPU backend (cpu_device.hpp) and the CUDA backend implement it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

namespace cgdp {

enum class DeviceKind { Cpu, Cuda };

const char* to_string(DeviceKind kind);

// Marks a point in a stream's work; another stream (or the host) can wait for it.
class Event {
 public:
  virtual ~Event() = default;
  // True once all work captured by the last record() has run (true if never recorded).
  virtual bool query() = 0;
  // Blocks the calling host thread until query() is true; rethrows the recording stream's error.
  virtual void synchronize() = 0;
};

// An ordered queue of work on one device. Work on different streams runs concurrently.
class Stream {
 public:
  virtual ~Stream() = default;
  virtual const std::string& name() const = 0;

  // Runs host code that issues work on this stream, in order with the stream's other work.
  // CPU: the function runs on the stream's worker and *is* the work. CUDA: it runs at once on
  // the calling thread and launches kernels on this stream.
  virtual void submit(std::function<void()> work) = 0;
  // Copies between device memory and pinned host memory (or device to device), in stream order.
  virtual void copy_async(void* dst, const void* src, size_t bytes) = 0;
  // Sets `bytes` of device memory to zero, in stream order.
  virtual void zero_async(void* dst, size_t bytes) = 0;
  // Captures all work submitted so far; `event` completes when it has run.
  virtual void record(Event& event) = 0;
  // Work submitted after this waits until `event`'s captured work has run.
  virtual void wait(Event& event) = 0;
  // Calls `fn` on a host thread once the preceding work has run. `fn` must be short and must
  // not call device APIs: it only hands work to someone else (e.g. the host aggregator). If it
  // throws, the stream has failed: synchronize() rethrows that exception.
  virtual void launch_host_func(std::function<void()> fn) = 0;
  // Blocks until all submitted work has run; rethrows the first error raised by that work.
  virtual void synchronize() = 0;
};

struct MemoryStats {
  int64_t device_bytes = 0;       // currently allocated on the device
  int64_t device_peak_bytes = 0;  // high-water mark
  int64_t pinned_bytes = 0;       // pinned host memory allocated through this device
};

// What enable_peer_access found: direct GPU-to-GPU access turned on, not possible between the two
// GPUs (copies go through the host), or nothing to do (the CPU backend, or the same device).
enum class PeerAccess { Enabled, Unsupported, NotApplicable };

class Device {
 public:
  virtual ~Device() = default;
  virtual DeviceKind kind() const = 0;
  virtual int index() const = 0;
  virtual std::string name() const = 0;
  // False for a device that only counts allocations (MeasuringDevice): fillers skip it.
  virtual bool holds_data() const { return true; }

  virtual std::unique_ptr<Stream> create_stream(const std::string& name) = 0;
  virtual std::unique_ptr<Event> create_event() = 0;

  // Raw allocation; prefer DeviceBuffer / PinnedHostBuffer, which free themselves.
  // Device memory comes back zero-filled.
  virtual void* allocate(size_t bytes) = 0;
  virtual void deallocate(void* ptr, size_t bytes) = 0;
  virtual void* allocate_pinned(size_t bytes) = 0;
  virtual void deallocate_pinned(void* ptr, size_t bytes) = 0;

  // Synchronous copy (for setup and checks, never on the training hot path).
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;

  // Makes this device the calling thread's current one (CUDA's current device is per thread);
  // an issuing thread calls it once, so every call it makes goes to its own GPU.
  virtual void bind_calling_thread() {}

  // Lets this device's copies read and write `peer`'s memory directly (CUDA peer access), so
  // device-to-device copies skip the host. Idempotent.
  virtual PeerAccess enable_peer_access(const Device& peer) { return PeerAccess::NotApplicable; }

  MemoryStats memory_stats() const;
  // Where this device's pinned host memory lives, for the run's first lines ("": nothing to say).
  virtual std::string pinned_memory_note() const { return ""; }

 protected:
  void count_device_alloc(int64_t bytes);
  void count_pinned_alloc(int64_t bytes);

 private:
  std::atomic<int64_t> device_bytes_{0};
  std::atomic<int64_t> device_peak_bytes_{0};
  std::atomic<int64_t> pinned_bytes_{0};
};

enum class MemorySpace { Device, PinnedHost };

// Move-only owner of memory in one space: device memory, or pinned (page-locked on CUDA) host
// memory for async copies. Memory space is in the type so nothing mixes them up.
template <MemorySpace Space>
class OwnedBuffer {
 public:
  OwnedBuffer() = default;
  OwnedBuffer(Device& device, size_t bytes) : device_(&device), bytes_(bytes) {
    if (bytes) ptr_ = Space == MemorySpace::Device ? device.allocate(bytes) : device.allocate_pinned(bytes);
  }
  ~OwnedBuffer() { reset(); }
  OwnedBuffer(OwnedBuffer&& other) noexcept { *this = std::move(other); }
  OwnedBuffer& operator=(OwnedBuffer&& other) noexcept {
    if (this != &other) {
      reset();
      device_ = std::exchange(other.device_, nullptr);
      ptr_ = std::exchange(other.ptr_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
  }
  OwnedBuffer(const OwnedBuffer&) = delete;
  OwnedBuffer& operator=(const OwnedBuffer&) = delete;

  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  void reset() {
    if (ptr_) {
      if (Space == MemorySpace::Device) device_->deallocate(ptr_, bytes_);
      else device_->deallocate_pinned(ptr_, bytes_);
    }
    ptr_ = nullptr;
    bytes_ = 0;
  }

 private:
  Device* device_ = nullptr;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

using DeviceBuffer = OwnedBuffer<MemorySpace::Device>;
using PinnedHostBuffer = OwnedBuffer<MemorySpace::PinnedHost>;

}  // namespace cgdp
