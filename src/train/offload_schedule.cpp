// The offload's copies and the events between them (offload_schedule.hpp).
#include "cgdp/train/offload_schedule.hpp"

#include <algorithm>

#include "cgdp/core/error.hpp"
#include "cgdp/trace/stream_trace.hpp"

namespace cgdp {

namespace {

void add_once(std::vector<int>& list, int k) {
  if (std::find(list.begin(), list.end(), k) == list.end()) list.push_back(k);
}

}  // namespace

OffloadSchedule::OffloadSchedule(Device& device, const ActivationPlan& plan, int worker)
    : worker_(worker) {
  std::vector<int> offloaded;  // indices into plan.activations
  for (size_t i = 0; i < plan.activations.size(); ++i)
    if (plan.activations[i].offloaded) offloaded.push_back(static_cast<int>(i));
  if (offloaded.empty()) return;
  out_ = device.create_stream(cat("w", worker, "-offload-out"));
  in_ = device.create_stream(cat("w", worker, "-offload-in"));
  const size_t steps = static_cast<size_t>(plan.steps);
  for (auto* by_step : {&out_after_, &fetch_before_, &wait_out_before_, &wait_in_before_})
    by_step->resize(steps);
  units_.resize(offloaded.size());
  for (size_t k = 0; k < offloaded.size(); ++k) {
    Unit& u = units_[k];
    u.activation = &plan.activations[offloaded[k]];
    for (auto* event : {&u.last_used, &u.out_done, &u.room_ready, &u.in_done})
      *event = device.create_event();
    out_after_[u.activation->last_forward].push_back(static_cast<int>(k));
    fetch_before_[plan.fetch_step(*u.activation)].push_back(static_cast<int>(k));
    wait_in_before_[u.activation->first_backward].push_back(static_cast<int>(k));
  }
  // Whoever writes bytes that an offloaded unit held earlier in the pass waits for its copy out:
  // the compute stream where a unit is produced, the in stream where one comes back.
  std::vector<int> unit_of(plan.activations.size(), -1);
  for (size_t k = 0; k < offloaded.size(); ++k) unit_of[offloaded[k]] = static_cast<int>(k);
  for (size_t k = 0; k < units_.size(); ++k) {
    const CopyOutWaiters waiters = copy_out_waiters(plan, *units_[k].activation);
    for (int step : waiters.write_steps) add_once(wait_out_before_[step], static_cast<int>(k));
    for (int b : waiters.fetched) add_once(units_[unit_of[b]].fetch_waits, static_cast<int>(k));
  }
}

void OffloadSchedule::before_step(int step, Stream& compute, Timeline& timeline) {
  if (empty()) return;
  for (int k : fetch_before_[step]) {
    Unit& u = units_[k];
    const PlannedActivation& a = *u.activation;
    compute.record(*u.room_ready);
    in_->wait(*u.room_ready);
    for (int j : u.fetch_waits) in_->wait(*units_[j].out_done);
    traced(*in_, timeline, worker_, "offload-in", a.name, "offload",
           [&] {
             in_->copy_async(a.moved_device_ptr(), a.host_ptr,
                             static_cast<size_t>(ActivationPlan::moved_bytes(a)));
           },
           {{"bytes", ActivationPlan::moved_bytes(a)}});
    in_->record(*u.in_done);
  }
  for (int k : wait_out_before_[step]) compute.wait(*units_[k].out_done);
  for (int k : wait_in_before_[step]) compute.wait(*units_[k].in_done);
}

void OffloadSchedule::after_step(int step, Stream& compute, Timeline& timeline) {
  if (empty()) return;
  for (int k : out_after_[step]) {
    Unit& u = units_[k];
    const PlannedActivation& a = *u.activation;
    compute.record(*u.last_used);
    out_->wait(*u.last_used);
    traced(*out_, timeline, worker_, "offload-out", a.name, "offload",
           [&] {
             out_->copy_async(a.host_ptr, a.moved_device_ptr(),
                              static_cast<size_t>(ActivationPlan::moved_bytes(a)));
           },
           {{"bytes", ActivationPlan::moved_bytes(a)}});
    out_->record(*u.out_done);
  }
}

}  // namespace cgdp
