// What the profiler derives from its measurements, pure (no trainer): fits of timed copies and
// sums, the calibrations of the exchange beside the layers, and medians.
#pragma once

#include <span>
#include <vector>

#include "cgdp/cost/profile.hpp"
#include "cgdp/sync/chunk_plan.hpp"

namespace cgdp {

// One timed point: `bytes` moved (or summed) in `us` microseconds.
struct TimedBytes {
  double bytes = 0;
  double us = 0;
};

// Fit of us = latency_us + bytes / (gbps * 1e3): the bandwidth from the ordinary least-squares
// slope (dominated by the large, memory-bound copies), the latency from the smallest copy's time
// less its bytes at that bandwidth (>= 0). Needs two or more sizes.
LinkCost fit_link(std::span<const TimedBytes> points);
// A bandwidth only (host and device sums): all the bytes over all the time, so that summing every
// point once takes the measured total.
double fit_gbps(std::span<const TimedBytes> points);
// Backward time lost per MB of exchange beside it (Profile::overlap_us_per_mb): the backward
// with per-layer chunks less the one-chunk backward (layer spans only, so sync points are not in
// it), over the MB of every chunk but the last (whose exchange runs after the layers). >= 0.
double overlap_us_per_mb(std::span<const ParamLayer> params, double one_chunk_us,
                         double per_layer_us);
// The exchange stretch (Profile::exchange_stretch) of a profile `p` whose other terms are set:
// the stages of every per-layer chunk but the last as measured beside the layers (copies as a
// mean over workers), over the same stages' unstretched times in the model. Never below 1
// (noise); 1 for one param layer.
double exchange_stretch(const Profile& p, std::span<const ParamLayer> params,
                        double stages_beside_us);
// On shared cores a core that a copy or a sum takes mid-way stalls the OpenMP region whose
// other threads wait for it, so the backward loses more than the exchange's core time spread
// over the cores. The factor (Profile::contention_factor): what per-layer chunks measured (their
// backward over the one chunk's) over what the model charges them at factor 1. Never below 0.
double contention_factor(const Profile& p, std::span<const ParamLayer> params, double one_chunk_us,
                         double per_layer_us);
// Median of a non-empty list (mean of the middle two for an even count).
double median(std::vector<double> values);

}  // namespace cgdp
