// `cgdp train`: flags -> TrainConfig -> Trainer. With no flags it trains the default model on
// Fashion-MNIST from Debian's dataset-fashion-mnist package.
#include "cgdp/train/trainer.hpp"
#include "cli/commands.hpp"
#include "cli/train_flags.hpp"

namespace cgdp::cli {

Runner add_train_command(CLI::App& app) {
  auto f = std::make_shared<TrainFlags>();
  TrainConfig& c = f->config;
  c.epochs = 8;
  c.solver.set_lr_policy("fixed");
  CLI::App* cmd = app.add_subcommand("train", "Train a model (default: fashion_cnn on Fashion-MNIST)");
  add_workload_flags(cmd, *f);
  cmd->add_option("--test-batch", c.test_batch, "Batch size for testing (default 100)")->check(CLI::PositiveNumber);
  auto* iters = cmd->add_option("-i,--iterations", c.iterations, "Iterations (SGD steps) to run")
                    ->check(CLI::PositiveNumber);
  cmd->add_option("-e,--epochs", c.epochs, "Epochs to run, when --iterations is not given")
      ->capture_default_str()->check(CLI::PositiveNumber)->excludes(iters);
  cmd->add_option("--accumulate", c.accumulate, "Micro-batches summed per update (Caffe's iter_size)")
      ->capture_default_str()->check(CLI::PositiveNumber);
  add_solver_flags(cmd, *f);
  cmd->add_option("--test-interval", c.test_interval, "Iterations between tests (default: each epoch; -1: end only)");
  cmd->add_option("--test-samples", c.test_samples, "Test on the first N test samples (default: all)");
  cmd->add_option("--display", c.display, "Iterations between progress lines (default: ~20 per run)");
  cmd->add_option("--metrics", c.metrics_path, "Write one JSON object per line per display/test point");
  cmd->add_option("--save", c.save_path, "Write the final parameters here (safetensors)");
  cmd->add_option("--snapshot-every", c.snapshot_every, "Write a checkpoint every N iterations");
  cmd->add_option("--snapshot-prefix", c.snapshot_prefix, "Checkpoints go to PREFIX_iter_N.ckpt (default: the model's name)");
  cmd->add_option("--resume", c.resume_path, "Continue from a checkpoint")->check(CLI::ExistingFile);
  cmd->add_flag("--plain", c.plain_output, "Plain progress lines even on a terminal");
  cmd->add_option("--sync", c.sync, "cgdp (default for > 1 device), ps0 (worker 0 is the server) or local");
  cmd->add_option("--chunk", c.chunk, "cgdp chunk plan: layer, K, bytes:MB, all, or boundaries b1,b2,...")
      ->capture_default_str();
  cmd->add_option("--timeline", c.timeline_path, "Write a Chrome trace (Perfetto) of every stream");
  cmd->add_flag("--phase-table", c.phase_table, "Print the per-phase time table at the end");
  return [f, cmd] {
    Trainer trainer(resolved_config(*f, *cmd));
    trainer.run();
    return 0;
  };
}

}  // namespace cgdp::cli
