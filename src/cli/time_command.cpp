// `cgdp time`: what `caffe time` prints, each layer's forward and backward time and the passes'
// totals, from the training run `cgdp profile` starts with (measure_layer_times).
#include <algorithm>
#include <vector>

#include "cgdp/measure/profiler.hpp"
#include "cli/commands.hpp"
#include "cli/layer_table.hpp"
#include "cli/train_flags.hpp"

namespace cgdp::cli {

namespace {

struct TimeFlags {
  TrainFlags train;
  ProfileOptions options;
};

}  // namespace

Runner add_time_command(CLI::App& app) {
  auto f = std::make_shared<TimeFlags>();
  CLI::App* cmd = app.add_subcommand(
      "time", "Time each layer's forward and backward in training iterations (as caffe time)");
  add_workload_flags(cmd, f->train);
  cmd->add_option("-i,--iterations", f->options.iterations,
                  "Measured training iterations (medians over them)")
      ->capture_default_str();
  cmd->add_option("--warmup", f->options.warmup, "Training iterations before measuring")
      ->capture_default_str();
  return [f, cmd] {
    check_worker_count(f->train.config, f->train.oversubscribe);
    const LayerTimes times = measure_layer_times(resolved_config(f->train, *cmd), f->options);
    const Profile& p = times.profile;
    std::printf(
        "cgdp: time of %s on %d %s worker(s) (first: %s), batch %d each, %s; medians of %d "
        "iterations after %d\n",
        p.model.c_str(), p.devices, p.backend.c_str(), p.device.c_str(), p.batch,
        p.precision.c_str(), f->options.iterations, f->options.warmup);
    std::vector<const LayerCost*> layers;
    for (const LayerCost& l : p.layers) layers.push_back(&l);
    const bool any = std::any_of(times.runs.begin(), times.runs.end(),
                                 [](const std::string& r) { return !r.empty(); });
    print_layer_table(
        layers, p.layers, "layer", stdout,
        any ? std::span<const std::string>(times.runs) : std::span<const std::string>());
    return 0;
  };
}

}  // namespace cgdp::cli
