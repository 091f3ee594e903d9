// The chunk search's state machine: explore coarser then finer plans from the start with
// Algorithm 1's step/range rules, compare trials by median, then re-measure the leader.
#include "cgdp/cost/chunk_search.hpp"

#include <algorithm>
#include <cmath>

#include "cgdp/core/error.hpp"
#include "cgdp/cost/fits.hpp"

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
  const std::vector<std::vector<double>>& trials = samples_[candidate];
  if (trials.empty()) return NAN;
  // Other work on the machine only ever slows iterations down: a trial far slower than the
  // candidate's fastest one was disturbed throughout, and is left out.
  double fastest = INFINITY;
  for (const auto& t : trials) fastest = std::min(fastest, median(t));
  std::vector<double> pooled;
  for (const auto& t : trials)
    if (median(t) <= (1 + options_.steady) * fastest)
      pooled.insert(pooled.end(), t.begin(), t.end());
  return median(pooled);
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

int ChunkSearch::confirmations_left() const {
  return std::max(0, options_.confirmations - static_cast<int>(confirmed_.size()));
}

// Half a trial slowed by something else moves its median: measure as long again, once, when the
// budget allows (MLtuner's longer trials for unstable branches).
bool ChunkSearch::extend_if_disturbed() {
  const int more = options_.interval - options_.warmup;
  if (trial_length_ != options_.interval) return false;
  const bool leader_check = confirming_ && current_ == best_;
  if (!fits(more, std::max(0, confirmations_left() - (leader_check ? 1 : 0)))) return false;
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
  samples_[current_].push_back(kept);
  t.counted_ms = median_ms(current_);
  using V = SearchTrial::Verdict;
  if (!confirming_) {
    const bool lead = trials_.empty() || median_ms(current_) < median_ms(best_);
    t.verdict = lead ? V::Kept : V::Rejected;
    if (lead) best_ = current_;
    explore_on();
    return t;
  }
  // Checking: the leader is whoever has the lowest median now.
  const int leader = best_;
  for (int c = 0; c < count_; ++c)
    if (!samples_[c].empty() && median_ms(c) < median_ms(best_)) best_ = c;
  t.second_look = current_ != leader;
  if (!t.second_look) {
    confirmed_.push_back(current_);
    t.verdict = best_ == current_ ? V::Confirmed : V::Overturned;
    next_check();
  } else if (best_ == current_) {  // the loser was the better plan: walk on past it
    looked_.push_back(current_);
    t.verdict = V::Kept;
    confirming_ = false;
    direction_ = current_ > leader ? +1 : -1;
    start_ = current_;
    offset_ = 0;
    explore_on();
  } else {
    looked_.push_back(current_);
    t.verdict = V::Rejected;
    next_check();
  }
  return t;
}

void ChunkSearch::explore_on() {
  if (fits(options_.interval, confirmations_left()) && try_next_position()) return;
  confirming_ = true;
  next_check();
}

// After exploring: re-measure the leader until one stands (at most `confirmations` times), then
// take a second look at a suspect, budget permitting; else settle.
void ChunkSearch::next_check() {
  const auto has = [](const std::vector<int>& list, int c) {
    return std::find(list.begin(), list.end(), c) != list.end();
  };
  if (!has(confirmed_, best_)) {
    if (confirmations_left() > 0 && fits(options_.interval, 0))
      start_trial(best_);
    else
      settle();
    return;
  }
  // A slow spell of the machine as long as a trial hides in no median, and may have ended a walk
  // early: the measured candidate nearest the leader on either side, if it lost by more than
  // `steady`, gets one more trial (with room left to re-measure it should it lead).
  int suspect = -1;
  for (const int side : {-1, +1}) {
    int c = best_ + side;
    while (c >= 0 && c < count_ && samples_[c].empty()) c += side;
    if (c < 0 || c >= count_ || has(looked_, c) || has(confirmed_, c)) continue;
    if (median_ms(c) <= (1 + options_.steady) * median_ms(best_)) continue;
    if (suspect < 0 || std::abs(c - best_) < std::abs(suspect - best_)) suspect = c;
  }
  if (suspect >= 0 && fits(options_.interval, std::min(1, confirmations_left())))
    start_trial(suspect);
  else
    settle();
}

// Algorithm 1's rules from the start, first towards coarser plans (+1), then finer (-1): moves of
// 1 until `step` away, then of `step`; a direction ends `step * range` past the best. A move past
// the axis's end tries the end itself (the coarsest or finest plan) once; measured plans are
// passed over.
bool ChunkSearch::try_next_position() {
  for (;;) {
    const int room = direction_ > 0 ? count_ - 1 - start_ : start_;
    const int offset =
        std::min(room, offset_ < options_.step ? offset_ + 1 : offset_ + options_.step);
    const int pos = start_ + direction_ * offset;
    const bool past_best = direction_ * (pos - best_) >= options_.step * options_.range;
    if (offset > offset_ && !past_best) {
      offset_ = offset;
      if (!samples_[pos].empty()) continue;
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
