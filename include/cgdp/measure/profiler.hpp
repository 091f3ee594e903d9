// Measures a Profile on this machine and backend: the trainer's own workers run training
// iterations side by side (so every figure includes the contention of a shared host), then copies,
// sync points, host sums and device sums are timed on their streams.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "cgdp/cost/profile.hpp"
#include "cgdp/net/net.hpp"
#include "cgdp/sync/chunk_plan.hpp"
#include "cgdp/trace/timeline.hpp"
#include "cgdp/train/train_config.hpp"

namespace cgdp {

struct ProfileOptions {
  int warmup = 2;       // training iterations run before measuring (caches, allocators)
  int iterations = 10;  // measured training iterations; layer, update and sync figures are medians
  // Copies are timed at min, 4 min, 16 min, ... up to max bytes, `repeats` times each.
  int64_t min_copy_bytes = int64_t{4} << 10;
  int64_t max_copy_bytes = int64_t{64} << 20;
  // Host and device sums are timed at the net's param-layer sizes and its whole gradient, each
  // capped at this many bytes (memory: devices + 1 buffers of it).
  int64_t max_sum_bytes = int64_t{64} << 20;
  int repeats = 5;
  // Host sums are timed for 1..this many inputs; 0: the worker count. More than the workers lets
  // one GPU's profile predict the host sum of several real GPUs.
  int sum_inputs = 0;
};

// Runs `config` (model, data, devices, batch, host threads; its sync, chunk and iteration fields
// are set by the profiler) and measures every field of the Profile. Throws the trainer's errors
// for a bad config and UsageError for bad options.
Profile measure_profile(const TrainConfig& config, const ProfileOptions& options);

// `cgdp time`: the same training run and layer figures as measure_profile, and nothing else (the
// model, backend, device, devices, batch and layers of the Profile are filled), with what runs
// where: per layer, "" or a note such as "forward in conv1" for a ReLU its convolution runs, whose
// own row is then empty while the other's holds the time.
struct LayerTimes {
  Profile profile;
  std::vector<std::string> runs;  // per layer of profile.layers
};
LayerTimes measure_layer_times(const TrainConfig& config, const ProfileOptions& options);

// Each layer's forward and backward from a run's timeline (`events`: `warmup` + `iterations`
// iterations of `workers` workers). In a pass a layer takes from the end of the pass's previous
// layer on its stream to its own end, so waits between layers count; the layers' medians over
// the measured iterations, on each iteration's slowest worker, are scaled to add up to the
// pass's median total.
std::vector<LayerCost> layer_costs_from_timeline(const Net<float>& net,
                                                 std::vector<TraceEvent> events, int warmup,
                                                 int iterations, int workers);
}  // namespace cgdp
