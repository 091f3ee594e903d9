// Per-phase time of an iteration, as in the CGDP paper's Table 3: broadcast, forward, backward,
// the exchange left after backward, gradient sum, update and total, averaged over iterations.
// Each worker's phases are averaged over workers; on a shared host the workers' paces differ, and
// a worker's "exchange after backward" then holds its wait for the slowest one's backward. So
// two rows are of the iteration as a whole, as the cost model predicts it: the slowest worker's
// backward, and the exchange left after the last backward to end.
#pragma once

#include <string>
#include <vector>

#include "cgdp/train/worker.hpp"

namespace cgdp {

struct PhaseTimes {
  double broadcast_ms = 0;
  double forward_ms = 0;
  double backward_ms = 0;
  double exchange_after_backward_ms = 0;
  double slowest_backward_ms = 0;              // the longest backward of any worker
  double exchange_after_last_backward_ms = 0;  // last exchange end less last backward end
  double sum_ms = 0;
  double update_ms = 0;
  double total_ms = 0;
  // The longest iteration's, to tell one stalled iteration from a mean that is slow throughout.
  double longest_sum_ms = 0;
  double longest_total_ms = 0;
};

class PhaseTable {
 public:
  // Adds one iteration: the workers' stream marks (averaged over workers), the scheme's sum time
  // and the iteration's wall time on the host.
  void add(const std::vector<Worker>& workers, int64_t sum_us, int64_t wall_us);
  int64_t iterations() const { return iterations_; }
  PhaseTimes mean() const;
  // A small aligned table, one phase per row, with `title` above it.
  std::string format(const std::string& title) const;

 private:
  PhaseTimes sum_;
  int64_t iterations_ = 0;
};

}  // namespace cgdp
