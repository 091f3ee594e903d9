// Issues one worker's 16-bit packing (net/activation_plan.hpp): each packed activation is narrowed
// into its 16-bit copy right after its last forward use and widened back into its arena bytes
// right before its first backward use, on the compute stream. The layers' own stream, so stream
// order alone keeps the arena's shared bytes safe; an offloaded unit's copy out is waited for as
// before any layer that writes its bytes (copy_out_waiters counts these writes).
#pragma once

#include <vector>

#include "cgdp/device/device.hpp"
#include "cgdp/device/layer_precision.hpp"
#include "cgdp/net/activation_plan.hpp"
#include "cgdp/trace/timeline.hpp"

namespace cgdp {

class PackSchedule {
 public:
  PackSchedule() = default;  // nothing packed: every call does nothing
  // `plan` must outlive the schedule (it is the net's); `precision` is the packs' format.
  PackSchedule(DeviceKind kind, Precision precision, const ActivationPlan& plan, int worker);

  bool empty() const { return narrow_after_.empty(); }
  // Called by the issuing thread around each step of a pass, in step order, after the offload's
  // before_step (whose waits cover these writes too). On the timeline's "compute" track.
  void before_step(int step, Stream& compute, Timeline& timeline);  // widens
  void after_step(int step, Stream& compute, Timeline& timeline);   // narrows

 private:
  DeviceKind kind_ = DeviceKind::Cpu;
  Precision precision_ = Precision::kFp32;
  int worker_ = 0;
  std::vector<std::vector<const PlannedActivation*>> narrow_after_, widen_before_;  // by step
};

}  // namespace cgdp
