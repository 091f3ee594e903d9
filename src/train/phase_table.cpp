// Phase table: turns stream-order marks into per-phase milliseconds.
#include "cgdp/train/phase_table.hpp"

#include <algorithm>
#include <cstdio>

namespace cgdp {

namespace {

double ms(int64_t from_us, int64_t to_us) { return to_us > from_us ? (to_us - from_us) / 1000.0 : 0.0; }

}  // namespace

void PhaseTable::add(const std::vector<Worker>& workers, int64_t sum_us, int64_t wall_us) {
  PhaseTimes t;
  int64_t last_backward_end = 0, last_exchange_end = 0;
  for (const Worker& w : workers) {
    const PhaseMarks& m = w.marks;
    t.broadcast_ms += ms(m.begin, m.forward_begin);
    t.forward_ms += ms(m.forward_begin, m.forward_end);
    t.backward_ms += ms(m.forward_end, m.backward_end);
    t.exchange_after_backward_ms += ms(m.backward_end, m.exchange_end);
    t.update_ms += ms(m.exchange_end, m.update_end);
    t.slowest_backward_ms = std::max(t.slowest_backward_ms, ms(m.forward_end, m.backward_end));
    last_backward_end = std::max(last_backward_end, m.backward_end);
    last_exchange_end = std::max(last_exchange_end, m.exchange_end);
  }
  sum_.slowest_backward_ms += t.slowest_backward_ms;
  sum_.exchange_after_last_backward_ms += ms(last_backward_end, last_exchange_end);
  const double n = static_cast<double>(workers.size());
  sum_.broadcast_ms += t.broadcast_ms / n;
  sum_.forward_ms += t.forward_ms / n;
  sum_.backward_ms += t.backward_ms / n;
  sum_.exchange_after_backward_ms += t.exchange_after_backward_ms / n;
  sum_.update_ms += t.update_ms / n;
  sum_.sum_ms += sum_us / 1000.0;
  sum_.total_ms += wall_us / 1000.0;
  sum_.longest_sum_ms = std::max(sum_.longest_sum_ms, sum_us / 1000.0);
  sum_.longest_total_ms = std::max(sum_.longest_total_ms, wall_us / 1000.0);
  ++iterations_;
}

PhaseTimes PhaseTable::mean() const {
  const double n = iterations_ ? static_cast<double>(iterations_) : 1.0;
  PhaseTimes m;
  m.broadcast_ms = sum_.broadcast_ms / n;
  m.forward_ms = sum_.forward_ms / n;
  m.backward_ms = sum_.backward_ms / n;
  m.exchange_after_backward_ms = sum_.exchange_after_backward_ms / n;
  m.slowest_backward_ms = sum_.slowest_backward_ms / n;
  m.exchange_after_last_backward_ms = sum_.exchange_after_last_backward_ms / n;
  m.sum_ms = sum_.sum_ms / n;
  m.update_ms = sum_.update_ms / n;
  m.total_ms = sum_.total_ms / n;
  m.longest_sum_ms = sum_.longest_sum_ms;
  m.longest_total_ms = sum_.longest_total_ms;
  return m;
}

std::string PhaseTable::format(const std::string& title) const {
  const PhaseTimes m = mean();
  const std::pair<const char*, double> rows[] = {
      {"broadcast", m.broadcast_ms},
      {"forward", m.forward_ms},
      {"backward", m.backward_ms},
      {"exchange after backward", m.exchange_after_backward_ms},
      {"gradient sum", m.sum_ms},
      {"update", m.update_ms},
      {"total per iteration", m.total_ms},
      {"backward, slowest worker", m.slowest_backward_ms},
      {"exchange after last backward", m.exchange_after_last_backward_ms},
      {"gradient sum, longest iteration", m.longest_sum_ms},
      {"total, longest iteration", m.longest_total_ms}};
  std::string out = title + cat(" (ms per iteration, mean of ", iterations_, " iterations)\n");
  for (const auto& [name, value] : rows) {
    char line[96];
    std::snprintf(line, sizeof line, "  %-31s %10.3f\n", name, value);
    out += line;
  }
  return out;
}

}  // namespace cgdp
