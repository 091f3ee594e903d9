// --chunk auto: candidate plans with predictions from a profile, the search fed with iteration
// times, and its log: one line per trial, then the outcome.
#include "cgdp/train/chunk_autotuner.hpp"

#include <cmath>
#include <cstdio>

#include "cgdp/core/error.hpp"
#include "cgdp/core/fixed.hpp"

namespace cgdp {

namespace {

// Seconds, or milliseconds below one second (tiny models search in milliseconds).
std::string wall_time(double ms) {
  return std::abs(ms) < 1e3 ? fixed(ms, 1) + " ms" : fixed(ms / 1e3, 2) + " s";
}

std::vector<PlanCandidate> auto_candidates(const TrainConfig& config, const Profile& profile,
                                           std::span<const ParamLayer> layers, int devices,
                                           int64_t batch) {
  WhatIf what_if;  // the profile may have been measured with another batch
  what_if.batch = static_cast<int>(batch);
  what_if.sum_lanes = config.sum_lanes;
  what_if.chunk_piece_kb = config.chunk_piece_kb;
  CostInputs inputs = make_cost_inputs(profile, layers, devices, what_if);
  inputs.local_when_alone = false;  // --chunk auto runs cgdp, one worker or more
  const std::vector<std::string>& items =
      config.chunk_plans.empty() ? kDefaultPlanSet : config.chunk_plans;
  return make_plan_set(layers, items, &inputs, "--chunk-plans");
}

}  // namespace

ChunkAutoTuner::ChunkAutoTuner(const TrainConfig& config, const Profile& profile,
                               std::vector<ParamLayer> layers, int devices, int64_t batch)
    : layers_(std::move(layers)),
      candidates_(auto_candidates(config, profile, layers_, devices, batch)),
      options_(config.chunk_search),
      search_(static_cast<int>(candidates_.size()), predicted_best_index(candidates_), options_),
      applied_(search_.current()) {}

const ChunkPlan* ChunkAutoTuner::plan_to_apply() {
  if (search_.current() == applied_) return nullptr;
  applied_ = search_.current();
  return &candidates_[applied_].plan;
}

std::vector<std::string> ChunkAutoTuner::record(double ms) {
  if (search_.settled()) return {};
  search_ms_ += ms;
  std::vector<std::string> lines;
  if (const auto trial = search_.record(ms)) lines.push_back(trial_line(*trial));
  if (search_.settled()) {
    const auto settled = outcome();
    lines.insert(lines.end(), settled.begin(), settled.end());
  }
  return lines;
}

std::string ChunkAutoTuner::describe_start(const std::string& profile_note) const {
  std::string plans;
  for (const PlanCandidate& c : candidates_) plans += cat(plans.empty() ? "" : " ", c.spec);
  const PlanCandidate& start = candidates_[search_.current()];
  return cat("cgdp: chunk search (", profile_note, ") over ", candidates_.size(),
             " plans, fine to coarse: ", plans, "; starts at the predicted best --chunk ",
             start.spec, " (", fixed(start.predicted_ms, 2), " ms); ", options_.interval,
             " iterations a trial (", options_.warmup, " dropped), step ", options_.step,
             ", range ", options_.range, ", at most ", options_.budget, " iterations");
}

std::string ChunkAutoTuner::trial_line(const SearchTrial& t) const {
  const PlanCandidate& c = candidates_[t.candidate];
  return cat("cgdp: chunk search: trial ", search_.trials().size(),
             t.second_look ? " (second look)" : "", ": --chunk ", c.spec, " (", c.chunks(),
             c.chunks() == 1 ? " chunk" : " chunks", "): median ", fixed(t.median_ms, 2), " ms (",
             fixed(t.min_ms, 2), "..", fixed(t.max_ms, 2), " over ", t.measured, " of ",
             t.iterations, " iterations", t.extended ? ", extended: disturbed" : "", ")",
             t.counted_ms != t.median_ms
                 ? cat(", counted with its other trials ", fixed(t.counted_ms, 2), " ms")
                 : std::string(),
             ", predicted ", fixed(c.predicted_ms, 2), " ms: ", to_string(t.verdict));
}

std::vector<std::string> ChunkAutoTuner::outcome() const {
  const int best = search_.best();
  const PlanCandidate& c = candidates_[best];
  if (search_.trials().empty())
    return {cat("cgdp: chunk search: nothing to search: ", describe(c.plan, layers_)),
            cat("cgdp: chosen plan: --chunk ", c.spec)};
  const std::string how =
      search_.settled() ? "settled after" : "stopped before settling (the run ended) after";
  return {cat("cgdp: chunk search ", how, " ", search_.iterations(), " iterations (",
              search_.trials().size(), " trials, ", wall_time(search_ms_), ") on ",
              describe(c.plan, layers_), ": median ", fixed(search_.median_ms(best), 2),
              " ms, predicted ", fixed(c.predicted_ms, 2), " ms; the search cost about ",
              wall_time(search_.cost_ms()), " more than running this plan all along"),
          cat("cgdp: chosen plan: --chunk ", c.spec)};
}

}  // namespace cgdp
