// The offline chunk tuner's parts: a sweep of candidate plans (short real trainings on one
// trainer, or the simulator's predictions alone), its table, and its plot.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "cgdp/cost/plan_set.hpp"
#include "cgdp/train/trainer.hpp"

namespace cgdp::tuner {

struct SweepRow {
  PlanCandidate candidate;
  double chunk_size = 0;   // layers per chunk, on average (Figure 2's x axis)
  std::vector<double> ms;  // measured iterations after warm-up; empty when only simulated
  double median_ms = NAN, min_ms = NAN, max_ms = NAN;
};

struct SweepOptions {
  int interval = 10;  // iterations per plan and round
  int warmup = 2;     // of them, dropped after each change of plan
  int rounds = 3;     // each round runs every plan once, in its own shuffled order
  uint64_t seed = 1;  // of the shuffles (--seed)
  // Throws UsageError naming the flag.
  void check() const;
};

std::vector<SweepRow> make_rows(std::vector<PlanCandidate> candidates, int num_layers);

// Fills every row's times from `trainer` (cgdp, a fixed learning rate), whose chunk plan is
// switched between runs of `interval` iterations; the rounds interleave the plans so that a slow
// spell of the machine does not fall on one plan only.
void measure_rows(Trainer& trainer, const SweepOptions& options, std::vector<SweepRow>& rows);

// plan, chunks, chunk size, median/min/max ms, predicted ms; then the best lines.
std::string format_table(const std::vector<SweepRow>& rows);

// gnuplot's terminal for a plot file: .svg or .png; UsageError naming --plot otherwise.
std::string terminal_for(const std::string& path);

// Time against chunk size with gnuplot: measured median (min..max as error bars) and predicted,
// to `path` (.svg or .png). Throws UsageError for another extension or without gnuplot, IoError
// when gnuplot fails.
void plot_rows(const std::vector<SweepRow>& rows, const std::string& path,
               const std::string& title);

}  // namespace cgdp::tuner
