// Issues one worker's activation offload (net/activation_plan.hpp): each offloaded activation goes
// to pinned host memory on an "out" stream right after its last forward use, and comes back on an
// "in" stream a few steps ahead of its first backward use. Events keep the arena's shared bytes
// safe: nothing writes over a range before the copy out of its last occupant has read it, and a
// copy back starts only once the compute stream is done with what held those bytes before.
#pragma once

#include <memory>
#include <vector>

#include "cgdp/device/device.hpp"
#include "cgdp/net/activation_plan.hpp"
#include "cgdp/trace/timeline.hpp"

namespace cgdp {

class OffloadSchedule {
 public:
  OffloadSchedule() = default;  // nothing offloaded: every call does nothing
  // `plan` must outlive the schedule (it is the net's).
  OffloadSchedule(Device& device, const ActivationPlan& plan, int worker);

  bool empty() const { return units_.empty(); }
  // Called by the issuing thread around each step of a pass, in step order (activation_plan.hpp).
  // The copies appear on the timeline's "offload-out" and "offload-in" tracks.
  void before_step(int step, Stream& compute, Timeline& timeline);
  void after_step(int step, Stream& compute, Timeline& timeline);
  // Both copy streams, for synchronize_all.
  Stream* out_stream() const { return out_.get(); }
  Stream* in_stream() const { return in_.get(); }

 private:
  struct Unit {
    const PlannedActivation* activation = nullptr;
    std::unique_ptr<Event> last_used;   // compute: done with its forward (the copy out may read)
    std::unique_ptr<Event> out_done;    // out: its values are on the host, its bytes may be reused
    std::unique_ptr<Event> room_ready;  // compute: done with what held its bytes before it returns
    std::unique_ptr<Event> in_done;     // in: its values are back
    std::vector<int> fetch_waits;       // units whose copy out must end before it comes back
  };

  int worker_ = 0;
  std::unique_ptr<Stream> out_, in_;
  std::vector<Unit> units_;
  // By step: units to copy out after it, units to fetch before it, units whose copy out the
  // compute stream waits for before it (their bytes are written there), units it needs back.
  std::vector<std::vector<int>> out_after_, fetch_before_, wait_out_before_, wait_in_before_;
};

}  // namespace cgdp
