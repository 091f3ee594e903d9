// chunk_tuner: the offline chunk-size tuner. Sweeps a set of chunk plans with short real trainings
// (one trainer, plans switched in between) or with the simulator alone (--simulate), prints a
// table and draws time against chunk size like the CGDP paper's Figure 2.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "cgdp/core/error.hpp"
#include "cgdp/cost/profile_match.hpp"
#include "cgdp/cost/simulator.hpp"
#include "cgdp/device/cpu_device.hpp"
#include "cgdp/net/model_file.hpp"
#include "cgdp/net/net.hpp"
#include "cgdp/train/trainer.hpp"
#include "chunk_tuner.hpp"
#include "cli/train_flags.hpp"

namespace cgdp::tuner {
namespace {

struct Flags {
  cli::TrainFlags train;  // the workload flags `cgdp train` has
  TrainConfig config;     // resolved from them
  SweepOptions sweep;
  std::vector<std::string> plans;
  std::string profile_path;
  bool simulate = false;
  std::string plot_path;
  std::string title;
};

// The param layers of the model's train net (as `cgdp predict` builds it), checked against the
// profile.
std::vector<ParamLayer> model_param_layers(const TrainConfig& c, const Profile& profile) {
  const std::string path = find_model_file(c.model);
  Net<float> net(load_model(path), Phase::Train, default_cpu_device(), 1, 1, path);
  check_profile_matches(profile, net);
  return param_layers(net);
}

std::vector<PlanCandidate> candidates(const Flags& f, std::span<const ParamLayer> layers,
                                      const Profile* profile) {
  std::vector<std::string> items = f.plans;
  if (items.empty()) items = profile ? kDefaultPlanSet : std::vector<std::string>{"equal", "all"};
  if (!profile) return make_plan_set(layers, items, nullptr, "--plans");
  WhatIf what_if;
  if (f.config.batch > 0) what_if.batch = static_cast<int>(f.config.batch);
  what_if.sum_lanes = f.config.sum_lanes;
  what_if.chunk_piece_kb = f.config.chunk_piece_kb;
  CostInputs in = make_cost_inputs(*profile, layers, f.config.devices, what_if);
  in.local_when_alone = false;  // the sweep runs cgdp (config.sync), one worker or more
  return make_plan_set(layers, items, &in, "--plans");
}

int run(Flags& f, const CLI::App& app) {
  f.config = cli::resolved_config(f.train, app);
  f.config.solver.set_lr_policy("fixed");  // timing only: any number of iterations
  f.config.solver.set_base_lr(0.01f);
  f.sweep.seed = f.config.seed;
  f.sweep.check();
  if (f.simulate && f.profile_path.empty()) throw UsageError("--simulate needs --profile P.json");
  if (!f.plot_path.empty()) terminal_for(f.plot_path);  // a bad name fails before the sweep
  std::optional<Profile> profile;
  if (!f.profile_path.empty()) profile = read_profile(f.profile_path);
  if (profile && app.count("--devices") == 0) f.config.devices = profile->devices;
  std::vector<SweepRow> rows;
  std::string setting;
  if (f.simulate) {
    const auto layers = model_param_layers(f.config, *profile);
    rows = make_rows(candidates(f, layers, &*profile), static_cast<int>(layers.size()));
    setting = cat("simulated from ", f.profile_path, ", ", f.config.devices, " devices");
  } else {
    cli::check_worker_count(f.config, f.train.oversubscribe);
    TrainConfig config = f.config;
    config.sync = "cgdp";
    config.iterations = 1;  // with a fixed learning rate the trainer may run any number
    Trainer trainer(config);
    const std::vector<ParamLayer>& layers = trainer.param_layers();
    rows = make_rows(candidates(f, layers, profile ? &*profile : nullptr),
                     static_cast<int>(layers.size()));
    std::printf("chunk_tuner: measuring %zu plans: %d rounds of %d iterations each (%d dropped)\n",
                rows.size(), f.sweep.rounds, f.sweep.interval, f.sweep.warmup);
    std::fflush(stdout);
    measure_rows(trainer, f.sweep, rows);
    setting = cat(f.config.devices, " ", f.config.device_kind, " devices, ", f.sweep.rounds, " x ",
                  f.sweep.interval - f.sweep.warmup, " iterations per plan");
  }
  std::printf("chunk_tuner: %s (%s)\n%s", f.config.model.c_str(), setting.c_str(),
              format_table(rows).c_str());
  if (!f.plot_path.empty()) {
    plot_rows(rows, f.plot_path, f.title.empty() ? cat(f.config.model, ": ", setting) : f.title);
    std::printf("chunk_tuner: wrote %s\n", f.plot_path.c_str());
  }
  return 0;
}

}  // namespace
}  // namespace cgdp::tuner

int main(int argc, char** argv) {
  using cgdp::tuner::Flags;
  Flags f;
  cgdp::TrainConfig& c = f.train.config;
  c.data = "synthetic";
  c.devices = 4;
  c.test_interval = -1;
  c.plain_output = true;
  CLI::App app{
      "chunk_tuner: iteration time of cgdp chunk plans, measured or simulated, and its plot"};
  cgdp::cli::add_workload_flags(&app, f.train);
  app.add_option("--plans", f.plans,
                 "Plans: equal, equal:A-B, best, or --chunk values "
                 "(default: equal best all with a profile, else equal all)");
  app.add_option("--profile", f.profile_path,
                 "Profile for predictions (and for 'best', --simulate)");
  app.add_flag("--simulate", f.simulate, "Predict only (needs --profile): no training");
  app.add_option("--interval", f.sweep.interval, "Iterations per plan and round")
      ->capture_default_str();
  app.add_option("--warmup", f.sweep.warmup, "Of them, dropped after each change of plan")
      ->capture_default_str();
  app.add_option("--rounds", f.sweep.rounds, "Rounds over all plans, each in a shuffled order")
      ->capture_default_str();
  app.add_option("--plot", f.plot_path,
                 "Draw time against chunk size to this .svg or .png (gnuplot)");
  app.add_option("--title", f.title, "Title of the plot");
  CLI11_PARSE(app, argc, argv);
  try {
    return cgdp::tuner::run(f, app);
  } catch (const cgdp::Error& e) {
    std::fprintf(stderr, "chunk_tuner: error: %s\n", e.what());
    return 1;
  }
}
