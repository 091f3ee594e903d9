// The chunk search's state machine: explore coarser then finer plans from the start with
// Algorithm 1's step/range rules, compare trials by median, then re-measure the leader.
#include "cgdp/cost/chunk_search.hpp"

#include <algorithm>
#include <cmath>

#include "cgdp/core/error.hpp"
#include "cgdp/cost/profiler.hpp"

namespace cgdp {

namespace {

void check_at_least(const char* field, int value, int least, const char* what) {
  if (value < least)
    throw UsageError(
        cat("--search-", field, ": expected ", what, " (at least ", least, "), got ", value));
}

}  // namespace

void ChunkSearchOptions::check() const {
  check_at_least("interval", interval, 1, "iterations per trial");
  check_at_least("warmup", warmup, 0, "iterations dropped after each change of plan");
  if (warmup >= interval)
    throw UsageError(cat("--search-warmup: ", warmup, " dropped iterations leave none of the ",
                         interval, " of a trial (--search-interval) to measure"));
  check_at_least("step", step, 1, "a step along the plans");
  check_at_least("range", range, 1, "steps past the best before giving up a direction");
  check_at_least("confirmations", confirmations, 0, "re-measurements of the leader");
  if (!(steady > 0))
    throw UsageError(cat("--search-steady: expected a fraction > 0, got ", steady));
  if (budget < (1 + confirmations) * interval)
    throw UsageError(cat("--search-budget: ", budget, " iterations cannot hold one trial and ",
                         confirmations, " re-measurements of ", interval, " iterations each"));
}

const char* to_string(SearchTrial::Verdict verdict) {
  switch (verdict) {
    case SearchTrial::Verdict::Kept:
      return "kept";
    case SearchTrial::Verdict::Rejected:
      return "rejected";
    case SearchTrial::Verdict::Confirmed:
      return "confirmed";
    default:
      return "overturned";
  }
}

ChunkSearch::ChunkSearch(int count, int start, ChunkSearchOptions options)
    : count_(count),
      options_(options),
      samples_(count),
      start_(start),
      current_(start),
      best_(start) {
  options_.check();
  CGDP_ASSERT(count >= 1 && start >= 0 && start < count);
  if (count == 1) settled_ = true;
  start_trial(start);
}

// Whether `iterations` more, then `confirmations` re-measurements, stay within the budget.
bool ChunkSearch::fits(int64_t iterations, int confirmations) const {
  return iterations_ + iterations + static_cast<int64_t>(confirmations) * options_.interval <=
         options_.budget;
}

double ChunkSearch::median_ms(int candidate) const {
  return samples_[candidate].empty() ? NAN : median(samples_[candidate]);
}

std::optional<SearchTrial> ChunkSearch::record(double ms) {
  if (settled_) return std::nullopt;
  ++iterations_;
  trial_times_.push_back(ms);
  if (static_cast<int>(trial_times_.size()) < trial_length_ || extend_if_disturbed())
    return std::nullopt;
  trials_.push_back(close_trial());
  return trials_.back();
}

// Half a trial slowed by something else moves its median: measure as long again, once, when the
// budget allows (MLtuner's longer trials for unstable branches).
bool ChunkSearch::extend_if_disturbed() {
  const int more = options_.interval - options_.warmup;
  if (trial_length_ != options_.interval) return false;
  const int left = confirming_ ? options_.confirmations - static_cast<int>(confirmed_.size()) - 1
                               : options_.confirmations;
  if (!fits(more, left)) return false;
  const std::vector<double> kept(trial_times_.begin() + options_.warmup, trial_times_.end());
  if (median(kept) <= (1 + options_.steady) * *std::min_element(kept.begin(), kept.end()))
    return false;
  trial_length_ += more;
  return true;
}

SearchTrial ChunkSearch::close_trial() {
  const std::vector<double> kept(trial_times_.begin() + options_.warmup, trial_times_.end());
  SearchTrial t;
  t.candidate = current_;
  t.median_ms = median(kept);
  t.min_ms = *std::min_element(kept.begin(), kept.end());
  t.max_ms = *std::max_element(kept.begin(), kept.end());
  t.iterations = static_cast<int>(trial_times_.size());
  t.measured = static_cast<int>(kept.size());
  t.extended = trial_length_ > options_.interval;
  samples_[current_].insert(samples_[current_].end(), kept.begin(), kept.end());
  if (!confirming_) {
    const bool first = trials_.empty();
    t.verdict = first || median_ms(current_) < median_ms(best_) ? SearchTrial::Verdict::Kept
                                                                : SearchTrial::Verdict::Rejected;
    if (t.verdict == SearchTrial::Verdict::Kept) best_ = current_;
    if (fits(options_.interval, options_.confirmations) && try_next_position()) return t;
    confirming_ = true;
    if (options_.confirmations == 0)
      settle();
    else
      start_trial(best_);
    return t;
  }
  // A re-measurement: the leader is whoever has the lowest pooled median now.
  confirmed_.push_back(current_);
  for (int c = 0; c < count_; ++c)
    if (!samples_[c].empty() && median_ms(c) < median_ms(best_)) best_ = c;
  t.verdict =
      best_ == current_ ? SearchTrial::Verdict::Confirmed : SearchTrial::Verdict::Overturned;
  const bool again = t.verdict == SearchTrial::Verdict::Overturned &&
                     static_cast<int>(confirmed_.size()) < options_.confirmations &&
                     std::find(confirmed_.begin(), confirmed_.end(), best_) == confirmed_.end();
  if (again)
    start_trial(best_);
  else
    settle();
  return t;
}

// Algorithm 1's rules from the start, first towards coarser plans (+1), then finer (-1): moves of
// 1 until `step` away, then of `step`; a direction ends `step * range` past the best. A move past
// the axis's end tries the end itself (the coarsest or finest plan) once.
bool ChunkSearch::try_next_position() {
  for (;;) {
    const int room = direction_ > 0 ? count_ - 1 - start_ : start_;
    const int offset =
        std::min(room, offset_ < options_.step ? offset_ + 1 : offset_ + options_.step);
    const int pos = start_ + direction_ * offset;
    const bool past_best = direction_ * (pos - best_) >= options_.step * options_.range;
    if (offset > offset_ && !past_best) {
      offset_ = offset;
      start_trial(pos);
      return true;
    }
    if (direction_ < 0) return false;
    direction_ = -1;
    offset_ = 0;
  }
}

void ChunkSearch::start_trial(int candidate) {
  current_ = candidate;
  trial_times_.clear();
  trial_length_ = options_.interval;
}

void ChunkSearch::settle() {
  settled_ = true;
  current_ = best_;
}

double ChunkSearch::cost_ms() const {
  const double final_ms = median_ms(best_);
  double cost = 0;
  for (const SearchTrial& t : trials_) cost += t.iterations * (t.median_ms - final_ms);
  return cost;
}

}  // namespace cgdp
