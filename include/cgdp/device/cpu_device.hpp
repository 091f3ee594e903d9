// The CPU backend: host memory, and streams that are real worker threads running their queue in
// order, so that work on two streams overlaps exactly as it would on a GPU.
#pragma once

#include <atomic>

#include "cgdp/device/device.hpp"

namespace cgdp {

class CpuDevice final : public Device {
 public:
  explicit CpuDevice(int index = 0) : index_(index) {}
  DeviceKind kind() const override { return DeviceKind::Cpu; }
  int index() const override { return index_; }
  std::string name() const override;

  std::unique_ptr<Stream> create_stream(const std::string& name) override;
  std::unique_ptr<Event> create_event() override;

  void* allocate(size_t bytes) override;
  void deallocate(void* ptr, size_t bytes) override;
  void* allocate_pinned(size_t bytes) override;
  void deallocate_pinned(void* ptr, size_t bytes) override;
  void copy(void* dst, const void* src, size_t bytes) override;

  // Test knob: after `copies` more async copies succeed, every later one fails with a
  // DeviceError, as a GPU copy would on a fault. Negative: never fail (the default).
  void fail_copies_after(int64_t copies) { copy_budget_->store(copies); }

 private:
  int index_;
  std::shared_ptr<std::atomic<int64_t>> copy_budget_ = std::make_shared<std::atomic<int64_t>>(-1);
};

// The process-wide CPU device used where no other is chosen (tests, data loading).
CpuDevice& default_cpu_device();

}  // namespace cgdp
