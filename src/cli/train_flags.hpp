// The flags of `cgdp train` that other commands running the trainer share (`cgdp profile`): what
// to run, on which data, with how many workers and threads; and the solver flags with their
// defaults. One place, so the same flag means the same thing in every command.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "cgdp/train/train_config.hpp"

namespace cgdp::cli {

struct TrainFlags {
  TrainConfig config;
  std::string solver_file;
  double lr = 0.02, momentum = 0.9, weight_decay = 5e-4, gamma = 0.1, power = 1.0;
  std::string lr_policy = "poly";  // linear decay to 0 over the run: fits any run length
  std::string solver_type = "SGD";
  double clip_gradients = -1, delta = 1e-8, momentum2 = 0.999, rms_decay = 0.99;
  int64_t stepsize = 0;
  std::vector<int64_t> stepvalues;
  bool oversubscribe = false;  // more workers than cores or GPUs
  std::string resize;          // --resize HxW
  std::string mean_file;       // --mean-file F.binaryproto
  std::string augment;         // --augment rrc:N
  std::vector<std::string> stages, test_stages;  // --stage, --test-stage
};

// --model, --data, --batch, --global-batch, --devices, --device-kind, --host-threads, --threads,
// --seed.
void add_workload_flags(CLI::App* cmd, TrainFlags& f);
// The image source's flags, part of add_workload_flags: --resize, --crop, --mirror, --augment,
// --mean-value, --std, --mean-file, --skip-bad-images, --pixel-scale, --loader-threads.
void add_image_flags(CLI::App* cmd, TrainFlags& f);
// Parses what add_image_flags left as text (--resize, --mean-file, --augment) into `config`.
void resolve_image_flags(const TrainFlags& f, const CLI::App& cmd, TrainConfig& config);
// --solver, --lr, --lr-policy, --gamma, --stepsize, --stepvalues, --power, --momentum,
// --weight-decay.
void add_solver_flags(CLI::App* cmd, TrainFlags& f);
// Refuses more workers than cores (cpu) or GPUs (cuda) unless `oversubscribe`: one line, no work.
// Commands that build workers call it (train, profile, chunk_tuner when it measures).
void check_worker_count(const TrainConfig& config, bool oversubscribe);
// --augment's value: "rrc:N" (torchvision's RandomResizedCrop to N x N, its defaults otherwise).
RandomResizedCrop parse_augment(const std::string& text);
// The config with its solver settings: the solver file's (if any), overridden by the flags given,
// and the flags' defaults for the rest (also for commands without solver flags).
TrainConfig resolved_config(const TrainFlags& f, const CLI::App& cmd);

}  // namespace cgdp::cli
