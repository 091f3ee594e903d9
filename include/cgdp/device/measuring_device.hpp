// A device that only counts: nets built on it allocate address space that is never touched, so a
// run's memory can be measured by the real allocation rules before any of it is committed.
#pragma once

#include "cgdp/device/device.hpp"

namespace cgdp {

class MeasuringDevice final : public Device {
 public:
  // Counts for a device of kind `counts_for`: the layers choose their engines, fusions and scratch
  // as on one (a CUDA worker's convolutions run their ReLU apart and keep no oneDNN layouts);
  // nothing runs on it either way.
  explicit MeasuringDevice(DeviceKind counts_for = DeviceKind::Cpu) : kind_(counts_for) {}
  DeviceKind kind() const override { return kind_; }
  int index() const override { return 0; }
  std::string name() const override { return "measuring"; }
  bool holds_data() const override { return false; }

  // Nothing runs on a measuring device; asking for a stream is a programming error.
  std::unique_ptr<Stream> create_stream(const std::string& name) override;
  std::unique_ptr<Event> create_event() override;

  // Reserves untouched, zero-reading address space (MAP_NORESERVE): counted, never committed.
  void* allocate(size_t bytes) override;
  void deallocate(void* ptr, size_t bytes) override;
  void* allocate_pinned(size_t bytes) override;
  void deallocate_pinned(void* ptr, size_t bytes) override;
  // Contents are not kept: a copy does nothing.
  void copy(void*, const void*, size_t) override {}

 private:
  DeviceKind kind_;
};

}  // namespace cgdp
