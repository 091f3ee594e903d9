// BSP state of one piece: window of live iterations, fixed-order sum, pending pulls.
#include "shard/piece_state.hpp"

#include <algorithm>

#include "cgdp/core/error.hpp"
#include "cgdp/sync/host_sum.hpp"

namespace cgdp {

PieceState::PieceState(int num_hosts, int64_t count, int sum_threads)
    : num_hosts_(num_hosts), count_(count), sum_threads_(sum_threads) {}

PieceState::Slot* PieceState::slot_for(int64_t iteration, std::string& why) {
  if (iteration < floor_) {
    why = cat("iteration ", iteration, " is already done here (now at ", floor_, ")");
    return nullptr;
  }
  for (Slot& s : slots_)
    if (s.iteration == iteration) return &s;
  if (!slots_.empty() && iteration != slots_.back().iteration + 1) {
    why = cat("iteration ", iteration, " is out of step: iterations ", slots_.front().iteration,
              "..", slots_.back().iteration, " are still open");
    return nullptr;
  }
  if (slots_.size() == 2) {
    why = cat("iteration ", iteration, " is more than one ahead of iteration ",
              slots_.front().iteration, ", which still waits for hosts");
    return nullptr;
  }
  Slot& s = slots_.emplace_back();
  s.iteration = iteration;
  s.pushes.resize(num_hosts_);
  s.pushed.assign(num_hosts_, 0);
  s.pulled.assign(num_hosts_, 0);
  return &s;
}

std::string PieceState::push(int64_t iteration, int host, zmq::message_t payload) {
  std::string why;
  Slot* slot = slot_for(iteration, why);
  if (!slot) return why;
  if (slot->pushed[host]) return cat("host ", host, " already pushed iteration ", iteration);
  slot->pushed[host] = 1;
  slot->pushes[host] = std::move(payload);
  if (++slot->num_pushed == num_hosts_) sum(*slot);
  return "";
}

std::string PieceState::pull(int64_t iteration, int host, zmq::message_t& route) {
  std::string why;
  Slot* slot = slot_for(iteration, why);
  if (!slot) return why;
  if (slot->pulled[host]) return cat("host ", host, " already pulled iteration ", iteration);
  slot->pulled[host] = 1;
  slot->waiting.push_back({std::move(route), host, iteration, zmq::message_t()});
  return "";
}

void PieceState::sum(Slot& slot) {
  if (num_hosts_ == 1) {
    slot.sum = std::move(slot.pushes[0]);  // the sum of one push is that push, bit for bit
  } else {
    std::vector<const float*> sources;
    for (const auto& p : slot.pushes) sources.push_back(p.data<float>());
    slot.sum.rebuild(static_cast<size_t>(count_) * sizeof(float));
    sum_buffers(slot.sum.data<float>(), sources, count_, sum_threads_);
  }
  slot.pushes.clear();
  slot.summed = true;
  ++sums_done_;
}

std::vector<ReadyReply> PieceState::take_ready() {
  std::vector<ReadyReply> ready;
  for (Slot& s : slots_) {
    if (!s.summed) continue;
    for (ReadyReply& r : s.waiting) {
      r.sum.copy(s.sum);
      ready.push_back(std::move(r));
      ++s.num_answered;
    }
    s.waiting.clear();
  }
  // Forget iterations every host has pulled; anything older can never complete (BSP) either.
  while (!slots_.empty()) {
    auto done = std::find_if(slots_.begin(), slots_.end(),
                             [&](const Slot& s) { return s.num_answered == num_hosts_; });
    if (done == slots_.end()) break;
    floor_ = done->iteration + 1;
    slots_.erase(slots_.begin(), done + 1);
  }
  return ready;
}

}  // namespace cgdp
