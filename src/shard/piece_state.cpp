// BSP state of one piece: window of open iterations, fixed-order sum handed out once.
#include "shard/piece_state.hpp"

#include <algorithm>

#include "cgdp/core/error.hpp"
#include "cgdp/sync/host_sum.hpp"

namespace cgdp {

PieceState::PieceState(int num_hosts, int64_t count, int sum_threads, int owner)
    : num_hosts_(num_hosts),
      pushers_(owner == kSummed ? num_hosts : 1),
      owner_(owner),
      count_(count),
      sum_threads_(sum_threads) {}

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
  return &s;
}

std::string PieceState::push(int64_t iteration, int host, zmq::message_t payload) {
  if (owner_ != kSummed && host != owner_)
    return cat("host ", host, " pushed rows that only host ", owner_, " gathers");
  std::string why;
  Slot* slot = slot_for(iteration, why);
  if (!slot) return why;
  if (slot->pushed[host]) return cat("host ", host, " already pushed iteration ", iteration);
  slot->pushed[host] = 1;
  slot->pushes[host] = std::move(payload);
  if (++slot->num_pushed < pushers_) return "";
  ready_ = ReadySum{iteration, sum(*slot)};
  ++sums_done_;
  // Done; an older open iteration can never complete now (BSP), so it goes too.
  floor_ = iteration + 1;
  while (!slots_.empty() && slots_.front().iteration <= iteration) slots_.pop_front();
  return "";
}

zmq::message_t PieceState::sum(Slot& slot) const {
  if (owner_ != kSummed) return std::move(slot.pushes[owner_]);  // gathered: passed on as it came
  if (num_hosts_ == 1) return std::move(slot.pushes[0]);  // the sum of one push, bit for bit
  std::vector<const float*> sources;
  for (const auto& p : slot.pushes) sources.push_back(p.data<float>());
  zmq::message_t out(static_cast<size_t>(count_) * sizeof(float));
  sum_buffers(out.data<float>(), sources, count_, sum_threads_);
  return out;
}

std::optional<ReadySum> PieceState::take_sum() {
  return std::exchange(ready_, std::nullopt);
}

}  // namespace cgdp
