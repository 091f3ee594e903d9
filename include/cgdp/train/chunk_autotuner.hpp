// `--chunk auto`: the candidate plans and their predictions from a profile, and the chunk search
// (cost/chunk_search.hpp) fed with the trainer's iteration times. The trainer only applies the
// plan it asks for and prints the lines it returns.
#pragma once

#include <string>
#include <vector>

#include "cgdp/cost/chunk_search.hpp"
#include "cgdp/cost/plan_set.hpp"
#include "cgdp/cost/profile.hpp"
#include "cgdp/train/train_config.hpp"

namespace cgdp {

class ChunkAutoTuner {
 public:
  // Candidates from config.chunk_plans (the default set when empty), predicted for `devices`
  // workers of `batch` samples; the search starts at the predicted best.
  ChunkAutoTuner(const TrainConfig& config, const Profile& profile, std::vector<ParamLayer> layers,
                 int devices, int64_t batch);

  // The plan the next iteration must run with, when it is not the one applied last; else null.
  // The first call returns nothing: the scheme starts with initial_plan().
  const ChunkPlan* plan_to_apply();
  const ChunkPlan& initial_plan() const { return candidates_[search_.current()].plan; }
  // One iteration's wall time, run with the plan applied last. Returns log lines: a finished
  // trial, and once settled, the outcome.
  std::vector<std::string> record(double ms);
  // One line on the candidates and settings, for the start of the run.
  std::string describe_start(const std::string& profile_note) const;
  // The plan chosen (or, before the search settled, the leader so far), what it cost, and the
  // --chunk value to paste.
  std::vector<std::string> outcome() const;

  bool settled() const { return search_.settled(); }
  const ChunkSearch& search() const { return search_; }
  const std::vector<PlanCandidate>& candidates() const { return candidates_; }

 private:
  std::string trial_line(const SearchTrial& trial) const;

  std::vector<ParamLayer> layers_;
  std::vector<PlanCandidate> candidates_;
  ChunkSearchOptions options_;
  ChunkSearch search_;
  int applied_;
  double search_ms_ = 0;  // wall time of the searching iterations
};

}  // namespace cgdp
