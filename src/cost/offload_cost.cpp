// A two-link simulation of one pass with offloaded activations, and the history's staging at the
// step (offload_cost.hpp).
#include "cgdp/cost/offload_cost.hpp"

#include <algorithm>
#include <cstdio>
#include <numeric>

namespace cgdp {

namespace {

double copy_us(const LinkCost& link, int64_t bytes) {
  return link.latency_us + static_cast<double>(bytes) / (link.gbps * 1e3);
}

}  // namespace

double history_staging_us(int64_t bytes, int64_t piece_bytes, const LinkCost& in,
                          const LinkCost& out) {
  if (bytes <= 0) return 0;
  piece_bytes = std::clamp<int64_t>(piece_bytes, 1, bytes);
  const int64_t pieces = (bytes + piece_bytes - 1) / piece_bytes;
  const double in_all = copy_us(in, bytes) + static_cast<double>(pieces - 1) * in.latency_us;
  const double out_all = copy_us(out, bytes) + static_cast<double>(pieces - 1) * out.latency_us;
  return std::max(in_all + copy_us(out, piece_bytes), copy_us(in, piece_bytes) + out_all);
}

double streamed_weights_us(int64_t bytes, const LinkCost& in, const LinkCost& out, int narrowings) {
  if (bytes <= 0) return 0;
  return (5 + narrowings) * copy_us(in, bytes) + 2 * copy_us(out, bytes);
}

double cpu_copy_share(double contention_factor, int shared_cores) {
  if (shared_cores <= 0) return 0;
  const double cores = static_cast<double>(shared_cores);
  return std::clamp(contention_factor, 1.0, cores) / cores;
}

OffloadPassCost predict_offload_pass(const std::vector<double>& step_us,
                                     std::vector<OffloadCopy> copies, const LinkCost& out,
                                     const LinkCost& in, double shared) {
  OffloadPassCost cost;
  cost.compute_us = std::accumulate(step_us.begin(), step_us.end(), 0.0);
  const size_t n = copies.size();
  std::vector<double> out_done(n, 0), in_done(n, 0);
  // What each step and each copy back waits for, beyond its own copy out.
  std::vector<std::vector<int>> step_waits(step_us.size()), fetch_waits(n);
  for (size_t c = 0; c < n; ++c) {
    for (int s : copies[c].steps_after_out) step_waits[s].push_back(static_cast<int>(c));
    for (int f : copies[c].fetches_after_out) fetch_waits[f].push_back(static_cast<int>(c));
  }
  double t = 0, out_free = 0, in_free = 0, copying = 0;
  for (int s = 0; s < static_cast<int>(step_us.size()); ++s) {
    for (size_t c = 0; c < n; ++c)
      if (copies[c].fetch_at == s) {
        double start = std::max({t, in_free, out_done[c]});
        for (int j : fetch_waits[c]) start = std::max(start, out_done[j]);
        const double d = copy_us(in, copies[c].bytes);
        in_free = in_done[c] = start + d;
        copying += d;
      }
    for (size_t c = 0; c < n; ++c)
      if (copies[c].needed_at == s) t = std::max(t, in_done[c]);
    for (int c : step_waits[s]) t = std::max(t, out_done[c]);
    t += step_us[s];
    for (size_t c = 0; c < n; ++c)
      if (copies[c].out_after == s) {
        const double d = copy_us(out, copies[c].bytes);
        out_free = out_done[c] = std::max(t, out_free) + d;
        copying += d;
      }
  }
  cost.pass_us = t + shared * copying;
  return cost;
}

}  // namespace cgdp
