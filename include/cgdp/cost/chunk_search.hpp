// The runtime chunk search (CGDP paper, sec. 4.2, Algorithm 1) made robust to noise: fed one
// iteration time at a time, it says which candidate plan to run next, and settles on one within a
// bounded number of iterations. Trials drop their warm-up and compare medians; disturbed trials
// run longer; the leader is re-measured, and losers next to it get a second look. It knows
// candidates only by their index on an axis (plans ordered fine to coarse), so tests drive it
// with synthetic timings.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace cgdp {

struct ChunkSearchOptions {
  int interval = 8;       // iterations per trial (Algorithm 1's `interval`)
  int warmup = 2;         // of them, dropped after each change of plan (caches, allocators)
  int step = 2;           // Algorithm 1's `step`: moves of 1 up to `step` away, then of `step`
  int range = 2;          // Algorithm 1's `range`: give up a direction `step * range` past the best
  int confirmations = 2;  // re-measurements of the leader at most
  // A trial whose median exceeds its fastest iteration by more than this fraction was disturbed
  // (half its iterations slowed by something else): it runs interval - warmup more, once.
  double steady = 0.2;
  // Iterations the search may take before it settles: exploring stops when another trial and the
  // re-measurements would not fit.
  int budget = 100;
  // Throws UsageError naming the field (as its command-line flag, --search-<field>).
  void check() const;
};

// What one trial (interval iterations on one candidate) found.
struct SearchTrial {
  enum class Verdict {
    Kept,        // the candidate leads (the start, or better than the leader)
    Rejected,    // not better than the leader
    Confirmed,   // the leader, re-measured, still leads
    Overturned,  // the leader, re-measured, lost the lead
  };
  int candidate = 0;
  double median_ms = 0;   // of this trial's iterations after warm-up
  double counted_ms = 0;  // the candidate's median_ms() after it (its trials pooled)
  double min_ms = 0;
  double max_ms = 0;
  int iterations = 0;     // fed, warm-up included
  int measured = 0;       // kept for the median
  bool extended = false;  // disturbed: ran interval - warmup more iterations
  // A loser measured again once the leader was confirmed; if it now leads (Kept), the walk goes
  // on past it.
  bool second_look = false;
  Verdict verdict = Verdict::Kept;
};

const char* to_string(SearchTrial::Verdict verdict);

class ChunkSearch {
 public:
  // Candidates 0..count-1, ordered so that neighbours are similar plans; the search starts at
  // `start` (the predicted best). One candidate: settled at once, nothing to try.
  ChunkSearch(int count, int start, ChunkSearchOptions options);

  // The candidate to run the next iteration with (the final choice once settled).
  int current() const { return current_; }
  bool settled() const { return settled_; }
  // Records the wall time of one iteration run with current(); returns the trial it completed.
  // Ignored once settled.
  std::optional<SearchTrial> record(double ms);

  // The leader: the lowest median_ms().
  int best() const { return best_; }
  // Median of a candidate's measured iterations, pooled over its trials but those whose median
  // is more than `steady` above its fastest trial's (slowed throughout by other work: interference
  // only ever slows down). NaN when never measured.
  double median_ms(int candidate) const;
  const std::vector<SearchTrial>& trials() const { return trials_; }
  int64_t iterations() const { return iterations_; }  // fed before settling
  // Extra wall time the search cost over running best() from the start, estimated from medians:
  // the sum over trials of iterations x (trial median - best's pooled median), in ms.
  double cost_ms() const;

 private:
  bool fits(int64_t iterations, int confirmations) const;
  bool extend_if_disturbed();
  SearchTrial close_trial();
  int confirmations_left() const;
  void explore_on();
  bool try_next_position();
  void next_check();
  void start_trial(int candidate);
  void settle();

  int count_;
  ChunkSearchOptions options_;
  std::vector<std::vector<std::vector<double>>> samples_;  // [candidate][trial], after warm-up
  std::vector<double> trial_times_;                        // the running trial, warm-up included
  int trial_length_ = 0;                                   // iterations the running trial takes
  std::vector<SearchTrial> trials_;
  std::vector<int> confirmed_;  // candidates re-measured as the leader
  std::vector<int> looked_;     // losers given a second look
  int start_;                   // where the current walk started
  int current_;
  int best_;
  int direction_ = +1;  // exploring up (coarser), then down
  int offset_ = 0;      // distance from the start in the current direction
  bool confirming_ = false;
  bool settled_ = false;
  int64_t iterations_ = 0;
};

}  // namespace cgdp
