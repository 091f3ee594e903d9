// What the profiler derives from its measurements, with no trainer in it: least-squares fits of
// copy and sum times, and the calibrations of the exchange beside the layers (contention factor,
// exchange stretch, overlap per MB), each against the cost model's own charge.
#include "cgdp/cost/fits.hpp"

#include <algorithm>

#include "cgdp/core/error.hpp"
#include "cgdp/cost/chunk_stages.hpp"
#include "cgdp/cost/cost_inputs.hpp"

namespace cgdp {

namespace {

// The stages of every per-layer chunk but the last: the exchanges that run beside the layers.
std::vector<std::vector<StageCost>> stages_beside_layers(const CostInputs& in,
                                                         std::span<const ParamLayer> params) {
  const ChunkPlan plan = per_layer_plan(params);
  std::vector<std::vector<StageCost>> beside;
  for (size_t c = 0; c + 1 < plan.chunks.size(); ++c)
    beside.push_back(chunk_stages(in, plan.chunks[c].offset * 4, plan.chunks[c].count * 4));
  return beside;
}

}  // namespace

double contention_factor(const Profile& p, std::span<const ParamLayer> params, double one_chunk_us,
                         double per_layer_us) {
  Profile unit = p;
  unit.contention_factor = 1;
  const CostInputs in = make_cost_inputs(unit, params, p.devices);
  double charged = 0;  // the last chunk's exchange runs after backward and is not charged
  for (const auto& stages : stages_beside_layers(in, params)) charged += contention_us(in, stages);
  if (charged <= 0) return 1;
  return std::max(0.0, (per_layer_us - one_chunk_us) / charged);
}

double median(std::vector<double> values) {
  CGDP_ASSERT(!values.empty());
  const size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + mid, values.end());
  if (values.size() % 2) return values[mid];
  return (values[mid] + *std::max_element(values.begin(), values.begin() + mid)) / 2;
}

double exchange_stretch(const Profile& p, std::span<const ParamLayer> params,
                        double stages_beside_us) {
  Profile unit = p;
  unit.exchange_stretch = 1;
  const CostInputs in = make_cost_inputs(unit, params, p.devices);
  double modelled = 0;
  for (const auto& stages : stages_beside_layers(in, params))
    for (const StageCost& stage : stages) modelled += stage_us(in, stage);
  if (modelled <= 0) return 1;
  return std::max(1.0, stages_beside_us / modelled);
}

double overlap_us_per_mb(std::span<const ParamLayer> params, double one_chunk_us,
                         double per_layer_us) {
  const ChunkPlan plan = per_layer_plan(params);
  int64_t beside = 0;
  for (size_t c = 0; c + 1 < plan.chunks.size(); ++c) beside += plan.chunks[c].count * 4;
  if (beside <= 0) return 0;
  return std::max(0.0, (per_layer_us - one_chunk_us) / (static_cast<double>(beside) * 1e-6));
}

LinkCost fit_link(std::span<const TimedBytes> points) {
  CGDP_ASSERT(points.size() >= 2);
  // Ordinary least squares for us = a + b x: the slope follows the large copies, which are
  // memory-bound (small ones run in cache, faster than any big chunk moves).
  double n = 0, sx = 0, sxx = 0, sy = 0, sxy = 0;
  for (const TimedBytes& p : points)
    n += 1, sx += p.bytes, sxx += p.bytes * p.bytes, sy += p.us, sxy += p.bytes * p.us;
  const double det = n * sxx - sx * sx;
  double b = det > 0 ? (n * sxy - sx * sy) / det : 0;  // us per byte
  if (b <= 0) b = 1.0 / (fit_gbps(points) * 1e3);      // noise: the plain ratio
  // The OLS intercept carries the large copies' noise; the smallest copy shows the fixed cost.
  const TimedBytes& smallest =
      *std::min_element(points.begin(), points.end(),
                        [](const TimedBytes& l, const TimedBytes& r) { return l.bytes < r.bytes; });
  return {1.0 / (b * 1e3), std::max(0.0, smallest.us - smallest.bytes * b)};
}

double fit_gbps(std::span<const TimedBytes> points) {
  CGDP_ASSERT(!points.empty());
  // All the bytes over all the time: at chunk-like sizes, the rate that gives the total time of
  // summing every chunk once (large chunks weigh as much as they cost).
  double bytes = 0, us = 0;
  for (const TimedBytes& p : points) bytes += p.bytes, us += p.us;
  return bytes / std::max(us, 1e-3) / 1e3;
}

}  // namespace cgdp
