// `cgdp train`: flags -> TrainConfig -> Trainer. With no flags it trains the default model on
// Fashion-MNIST from Debian's dataset-fashion-mnist package.
#include "cgdp/net/model_file.hpp"
#include "cgdp/train/trainer.hpp"
#include "cli/commands.hpp"

namespace cgdp::cli {

namespace {

struct TrainFlags {
  TrainConfig config;
  std::string solver_file;
  double lr = 0.02, momentum = 0.9, weight_decay = 5e-4, gamma = 0.1, power = 1.0;
  std::string lr_policy = "poly";  // linear decay to 0 over the run: fits any run length
  int64_t stepsize = 0;
  std::vector<int64_t> stepvalues;
};

// Starts from the solver file (if any); flags the user typed override its fields.
proto::SolverParameter solver_settings(const TrainFlags& f, const CLI::App& cmd) {
  proto::SolverParameter s;
  if (!f.solver_file.empty()) s = load_solver(f.solver_file);
  auto given = [&](const char* flag) { return cmd.count(flag) > 0 || f.solver_file.empty(); };
  if (given("--lr") || !s.has_base_lr()) s.set_base_lr(static_cast<float>(f.lr));
  if (given("--momentum") || !s.has_momentum()) s.set_momentum(static_cast<float>(f.momentum));
  if (given("--weight-decay") || !s.has_weight_decay()) s.set_weight_decay(static_cast<float>(f.weight_decay));
  if (given("--lr-policy")) s.set_lr_policy(f.lr_policy);
  if (given("--gamma") || !s.has_gamma()) s.set_gamma(static_cast<float>(f.gamma));
  if (given("--power") || !s.has_power()) s.set_power(static_cast<float>(f.power));
  if (given("--stepsize") && f.stepsize > 0) s.set_stepsize(static_cast<int32_t>(f.stepsize));
  if (given("--stepvalues") && !f.stepvalues.empty()) {
    s.clear_stepvalue();
    for (int64_t v : f.stepvalues) s.add_stepvalue(static_cast<int32_t>(v));
  }
  return s;
}

}  // namespace

Runner add_train_command(CLI::App& app) {
  auto f = std::make_shared<TrainFlags>();
  TrainConfig& c = f->config;
  c.epochs = 8;
  c.solver.set_lr_policy("fixed");
  CLI::App* cmd = app.add_subcommand("train", "Train a model (default: fashion_cnn on Fashion-MNIST)");
  cmd->add_option("-m,--model", c.model, "Model file, or a name from models/")->capture_default_str();
  cmd->add_option("-d,--data", c.data, "idx:DIR, cifar10:DIR or synthetic[:C,H,W,K]")->capture_default_str();
  cmd->add_option("-b,--batch", c.batch, "Batch size (default: the model's Input)")->check(CLI::PositiveNumber);
  cmd->add_option("--test-batch", c.test_batch, "Batch size for testing (default 100)")->check(CLI::PositiveNumber);
  auto* iters = cmd->add_option("-i,--iterations", c.iterations, "Iterations (SGD steps) to run")
                    ->check(CLI::PositiveNumber);
  cmd->add_option("-e,--epochs", c.epochs, "Epochs to run, when --iterations is not given")
      ->capture_default_str()->check(CLI::PositiveNumber)->excludes(iters);
  cmd->add_option("--accumulate", c.accumulate, "Micro-batches summed per update (Caffe's iter_size)")
      ->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--solver", f->solver_file, "Solver settings file (prototxt); flags override it")
      ->check(CLI::ExistingFile);
  cmd->add_option("--lr", f->lr, "Base learning rate")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--lr-policy", f->lr_policy, "fixed, step, multistep or poly")->capture_default_str();
  cmd->add_option("--gamma", f->gamma, "Decay factor for step/multistep")->capture_default_str();
  cmd->add_option("--stepsize", f->stepsize, "Iterations between decays (step)");
  cmd->add_option("--stepvalues", f->stepvalues, "Iterations at which to decay (multistep)")->delimiter(',');
  cmd->add_option("--power", f->power, "Exponent for poly")->capture_default_str();
  cmd->add_option("--momentum", f->momentum, "SGD momentum")->capture_default_str();
  cmd->add_option("--weight-decay", f->weight_decay, "L2 weight decay")->capture_default_str();
  cmd->add_option("--seed", c.seed, "Seed for initialisation, shuffling and dropout")->capture_default_str();
  cmd->add_option("--test-interval", c.test_interval, "Iterations between tests (default: each epoch; -1: end only)");
  cmd->add_option("--test-samples", c.test_samples, "Test on the first N test samples (default: all)");
  cmd->add_option("--display", c.display, "Iterations between progress lines (default: ~20 per run)");
  cmd->add_option("--metrics", c.metrics_path, "Write one JSON object per line per display/test point");
  cmd->add_option("--save", c.save_path, "Write the final parameters here (safetensors)");
  cmd->add_option("--snapshot-every", c.snapshot_every, "Write a checkpoint every N iterations");
  cmd->add_option("--snapshot-prefix", c.snapshot_prefix, "Checkpoints go to PREFIX_iter_N.ckpt (default: the model's name)");
  cmd->add_option("--resume", c.resume_path, "Continue from a checkpoint")->check(CLI::ExistingFile);
  cmd->add_flag("--plain", c.plain_output, "Plain progress lines even on a terminal");
  cmd->add_option("--threads", c.threads, "CPU threads for compute (default: all cores)");
  cmd->add_option("--loader-threads", c.loader_threads, "Threads that fill each batch")
      ->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("-n,--devices", c.devices, "Data-parallel workers (devices)")->capture_default_str();
  cmd->add_option("--device-kind", c.device_kind, "cpu, or cuda (workers share GPUs round-robin)")
      ->capture_default_str();
  cmd->add_flag("--tf32", c.tf32, "CUDA: let fp32 convolutions use TF32 tensor cores (PyTorch's default)");
  cmd->add_option("--cudnn-workspace-mb", c.cudnn_workspace_mb,
                  "CUDA: the most scratch one convolution algorithm may use (MiB)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  cmd->add_flag("--nondeterministic", c.nondeterministic,
                "CUDA: let cuDNN pick algorithms that are not bit-reproducible (sometimes faster)");
  cmd->add_option("--global-batch", c.global_batch, "Batch over all workers, split evenly (instead of --batch)")
      ->excludes("--batch");
  cmd->add_option("--sync", c.sync, "cgdp (default for > 1 device), ps0 (worker 0 is the server) or local");
  cmd->add_option("--chunk", c.chunk, "cgdp chunk plan: layer, K, bytes:MB, all, or boundaries b1,b2,...")
      ->capture_default_str();
  cmd->add_option("--host-threads", c.host_threads, "Threads that sum gradients on the host (default: all)");
  cmd->add_option("--timeline", c.timeline_path, "Write a Chrome trace (Perfetto) of every stream");
  cmd->add_flag("--phase-table", c.phase_table, "Print the per-phase time table at the end");
  return [f, cmd] {
    TrainConfig config = f->config;
    config.solver = solver_settings(*f, *cmd);
    Trainer trainer(config);
    trainer.run();
    return 0;
  };
}

}  // namespace cgdp::cli
