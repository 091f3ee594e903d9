// Phase table: turns stream-order marks into per-phase milliseconds.
#include "cgdp/train/phase_table.hpp"

#include <cstdio>

namespace cgdp {

namespace {

double ms(int64_t from_us, int64_t to_us) { return to_us > from_us ? (to_us - from_us) / 1000.0 : 0.0; }

}  // namespace

void PhaseTable::add(const std::vector<Worker>& workers, int64_t sum_us, int64_t wall_us) {
  PhaseTimes t;
  for (const Worker& w : workers) {
    const PhaseMarks& m = w.marks;
    t.broadcast_ms += ms(m.begin, m.forward_begin);
    t.forward_ms += ms(m.forward_begin, m.forward_end);
    t.backward_ms += ms(m.forward_end, m.backward_end);
    t.exchange_after_backward_ms += ms(m.backward_end, m.exchange_end);
    t.update_ms += ms(m.exchange_end, m.update_end);
  }
  const double n = static_cast<double>(workers.size());
  sum_.broadcast_ms += t.broadcast_ms / n;
  sum_.forward_ms += t.forward_ms / n;
  sum_.backward_ms += t.backward_ms / n;
  sum_.exchange_after_backward_ms += t.exchange_after_backward_ms / n;
  sum_.update_ms += t.update_ms / n;
  sum_.sum_ms += sum_us / 1000.0;
  sum_.total_ms += wall_us / 1000.0;
  ++iterations_;
}

PhaseTimes PhaseTable::mean() const {
  const double n = iterations_ ? static_cast<double>(iterations_) : 1.0;
  return {sum_.broadcast_ms / n, sum_.forward_ms / n, sum_.backward_ms / n,
          sum_.exchange_after_backward_ms / n, sum_.sum_ms / n, sum_.update_ms / n, sum_.total_ms / n};
}

std::string PhaseTable::format(const std::string& title) const {
  const PhaseTimes m = mean();
  const std::pair<const char*, double> rows[] = {
      {"broadcast", m.broadcast_ms},   {"forward", m.forward_ms},
      {"backward", m.backward_ms},     {"exchange after backward", m.exchange_after_backward_ms},
      {"gradient sum", m.sum_ms},      {"update", m.update_ms},
      {"total per iteration", m.total_ms}};
  std::string out = title + cat(" (ms per iteration, mean of ", iterations_, " iterations)\n");
  for (const auto& [name, value] : rows) {
    char line[96];
    std::snprintf(line, sizeof line, "  %-26s %10.3f\n", name, value);
    out += line;
  }
  return out;
}

}  // namespace cgdp
