// The per-phase table from the workers' stream marks: each worker's phases averaged over workers,
// and the iteration's own: the slowest worker's backward and the exchange left after the last
// backward, which a slow worker's wait does not inflate.
#include "cgdp/train/phase_table.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

namespace cgdp {
namespace {

// Microseconds. Worker 0 ends backward at 10 ms and waits; worker 1 ends it at 30 ms; the
// exchange ends at 32 ms for both.
std::vector<Worker> two_workers_one_slow() {
  std::vector<Worker> workers(2);
  workers[0].marks = {0, 1000, 4000, 10000, 32000, 33000};
  workers[1].marks = {0, 1000, 6000, 30000, 32000, 34000};
  return workers;
}

// The value on the table's row `name` (two spaces, the name, spaces, the number); NaN if none.
double row(const std::string& text, const std::string& name) {
  const size_t at = text.find("\n  " + name + " ");
  if (at == std::string::npos) return std::nan("");
  return std::stod(text.substr(at + 3 + name.size()));
}

TEST(PhaseTable, WorkersAreAveragedAndTheIterationHasItsOwnRows) {
  PhaseTable table;
  const std::vector<Worker> workers = two_workers_one_slow();
  table.add(workers, 5000, 34000);
  table.add(workers, 9000, 40000);  // one slower iteration: the means and the longest rows
  const PhaseTimes m = table.mean();
  EXPECT_DOUBLE_EQ(m.forward_ms, (3 + 5) / 2.0);
  EXPECT_DOUBLE_EQ(m.backward_ms, (6 + 24) / 2.0);
  EXPECT_DOUBLE_EQ(m.exchange_after_backward_ms, (22 + 2) / 2.0);  // worker 0 waits 20 of its 22
  EXPECT_DOUBLE_EQ(m.slowest_backward_ms, 24);
  EXPECT_DOUBLE_EQ(m.exchange_after_last_backward_ms, 2);
  EXPECT_DOUBLE_EQ(m.update_ms, 1.5);
  EXPECT_DOUBLE_EQ(m.total_ms, 37);
  EXPECT_DOUBLE_EQ(m.sum_ms, 7);
  const std::string text = table.format("phases");
  EXPECT_EQ(row(text, "backward, slowest worker"), 24) << text;
  EXPECT_EQ(row(text, "exchange after last backward"), 2) << text;
  EXPECT_EQ(row(text, "exchange after backward"), 12) << text;
  EXPECT_EQ(row(text, "gradient sum, longest iteration"), 9) << text;
  EXPECT_EQ(row(text, "total, longest iteration"), 40) << text;
}

}  // namespace
}  // namespace cgdp
