// The sweep: rows from candidates, real iteration times from one trainer, and the table.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <random>

#include "cgdp/core/error.hpp"
#include "cgdp/cost/fits.hpp"
#include "cgdp/train/trainer.hpp"
#include "chunk_tuner.hpp"

namespace cgdp::tuner {

void SweepOptions::check() const {
  if (interval < 1)
    throw UsageError(cat("--interval: expected at least 1 iteration per plan, got ", interval));
  if (warmup < 0 || warmup >= interval)
    throw UsageError(cat("--warmup: expected 0 to ", interval - 1, " iterations dropped of the ",
                         interval, " per plan (--interval), got ", warmup));
  if (rounds < 1) throw UsageError(cat("--rounds: expected at least 1, got ", rounds));
}

std::vector<SweepRow> make_rows(std::vector<PlanCandidate> candidates, int num_layers) {
  std::vector<SweepRow> rows;
  for (PlanCandidate& c : candidates) {
    SweepRow row;
    row.chunk_size = mean_chunk_size(c, num_layers);
    row.candidate = std::move(c);
    rows.push_back(std::move(row));
  }
  return rows;
}

void measure_rows(Trainer& trainer, const SweepOptions& options, std::vector<SweepRow>& rows) {
  using Clock = std::chrono::steady_clock;
  std::vector<size_t> order(rows.size());
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(options.seed);
  for (int round = 0; round < options.rounds; ++round) {
    std::shuffle(order.begin(), order.end(), rng);
    for (const size_t r : order) {
      trainer.set_chunk_plan(rows[r].candidate.plan);
      for (int i = 0; i < options.interval; ++i) {
        const auto start = Clock::now();
        trainer.train_iteration();
        const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
        if (i >= options.warmup) rows[r].ms.push_back(ms);
      }
    }
  }
  for (SweepRow& row : rows) {
    row.median_ms = median(row.ms);
    row.min_ms = *std::min_element(row.ms.begin(), row.ms.end());
    row.max_ms = *std::max_element(row.ms.begin(), row.ms.end());
  }
}

namespace {

std::string number(double value) {
  char buf[32];
  if (std::isnan(value)) return "-";
  std::snprintf(buf, sizeof buf, "%.2f", value);
  return buf;
}

// The row with the lowest `field`, or null when no row has one.
const SweepRow* lowest(const std::vector<SweepRow>& rows, double (*field)(const SweepRow&)) {
  const SweepRow* best = nullptr;
  for (const SweepRow& row : rows)
    if (!std::isnan(field(row)) && (!best || field(row) < field(*best))) best = &row;
  return best;
}

}  // namespace

std::string format_table(const std::vector<SweepRow>& rows) {
  size_t width = 4;
  for (const SweepRow& row : rows) width = std::max(width, row.candidate.spec.size());
  char line[512];
  std::snprintf(line, sizeof line, "%-*s %6s %6s %10s %10s %10s %13s\n", static_cast<int>(width),
                "plan", "chunks", "size", "median ms", "min ms", "max ms", "predicted ms");
  std::string out = line;
  for (const SweepRow& row : rows) {
    std::snprintf(line, sizeof line, "%-*s %6d %6.2f %10s %10s %10s %13s\n",
                  static_cast<int>(width), row.candidate.spec.c_str(), row.candidate.chunks(),
                  row.chunk_size, number(row.median_ms).c_str(), number(row.min_ms).c_str(),
                  number(row.max_ms).c_str(), number(row.candidate.predicted_ms).c_str());
    out += line;
  }
  const auto describe_best = [](const char* what, const SweepRow* row, double ms) {
    return cat(what, ": --chunk ", row->candidate.spec, " (", number(ms), " ms)\n");
  };
  if (const SweepRow* m = lowest(rows, [](const SweepRow& r) { return r.median_ms; }))
    out += describe_best("best measured", m, m->median_ms);
  if (const SweepRow* p = lowest(rows, [](const SweepRow& r) { return r.candidate.predicted_ms; }))
    out += describe_best("best predicted", p, p->candidate.predicted_ms);
  return out;
}

}  // namespace cgdp::tuner
