// `cgdp train`: flags -> TrainConfig -> Trainer. With no flags it trains the default model on
// Fashion-MNIST from Debian's dataset-fashion-mnist package.
#include <cstdlib>

#include "cgdp/launchers/launched_hosts.hpp"
#include "cgdp/measure/chunk_profile.hpp"
#include "cgdp/train/trainer.hpp"
#include "cli/commands.hpp"
#include "cli/launcher_link.hpp"
#include "cli/number_checks.hpp"
#include "cli/train_flags.hpp"

namespace cgdp::cli {

namespace {

// --chunk auto's settings.
void add_chunk_search_options(CLI::App& cmd, TrainConfig& c) {
  ChunkSearchOptions& s = c.chunk_search;
  const std::string a = "--chunk auto: ";
  cmd.add_option("--profile", c.profile_path, a + "predict from this profile (default: measure one)");
  cmd.add_option("--chunk-plans", c.chunk_plans,
                 a + "candidates: equal, equal:A-B, best, --chunk values (default: equal best all)");
  cmd.add_option("--search-interval", s.interval, a + "iterations per trial")->capture_default_str();
  cmd.add_option("--search-warmup", s.warmup, a + "iterations dropped after each change")
      ->capture_default_str();
  cmd.add_option("--search-step", s.step, a + "Algorithm 1's step along the plans")
      ->capture_default_str();
  cmd.add_option("--search-range", s.range, a + "steps past the best before turning")
      ->capture_default_str();
  cmd.add_option("--search-confirmations", s.confirmations, a + "re-measurements of the leader")
      ->capture_default_str();
  cmd.add_option("--search-steady", s.steady, a + "median/min - 1 above which a trial runs longer")
      ->capture_default_str();
  cmd.add_option("--search-budget", s.budget, a + "iterations before the search must settle")
      ->capture_default_str();
}

}  // namespace

Runner add_train_command(CLI::App& app) {
  auto f = std::make_shared<TrainFlags>();
  TrainConfig& c = f->config;
  c.epochs = 8;
  c.solver.set_lr_policy("fixed");
  CLI::App* cmd = app.add_subcommand("train", "Train a model (default: fashion_cnn on Fashion-MNIST)");
  add_workload_flags(cmd, *f);
  cmd->add_option("--test-batch", c.test_batch, "Batch size for testing (default: the TEST data layer's batch_size, else the per-worker batch)")->check(kPositive);
  auto* iters = cmd->add_option("-i,--iterations", c.iterations, "Iterations (SGD steps) to run")
                    ->check(kPositive);
  cmd->add_option("-e,--epochs", c.epochs, "Epochs to run, when --iterations is not given")
      ->capture_default_str()->check(kPositive)->excludes(iters);
  cmd->add_option("--accumulate", c.accumulate, "Micro-batches summed per update (Caffe's iter_size)")
      ->capture_default_str()->check(kPositive);
  add_solver_flags(cmd, *f);
  cmd->add_option("--test-interval", c.test_interval, "Iterations between tests (default: each epoch; -1: end only)");
  cmd->add_option("--test-samples", c.test_samples, "Test on the first N test samples (default: all)");
  cmd->add_option("--test-iter", c.test_iter, "Test on N test batches (Caffe's test_iter; instead of --test-samples)")
      ->excludes("--test-samples")->check(kPositive);
  cmd->add_flag("--test-initialization", c.test_initialization, "Also test before the first iteration");
  cmd->add_option("--stage", f->stages,
                  "The train net's stages (Caffe's -stage; beside a solver's train_state): layers "
                  "whose rules name a stage are kept only with it")
      ->delimiter(',');
  cmd->add_option("--test-stage", f->test_stages,
                  "The test net's stages (beside a solver's test_state)")
      ->delimiter(',');
  cmd->add_option("--display", c.display, "Iterations between progress lines (default: ~20 per run; -1: the last only)");
  cmd->add_option("--average-loss", c.average_loss,
                  "Progress lines show the mean loss of the last N iterations (default: since the last line)")
      ->check(kPositive);
  cmd->add_option("--metrics", c.metrics_path, "Write one JSON object per line per display/test point");
  cmd->add_option("--save", c.save_path, "Write the final parameters here (safetensors)");
  cmd->add_option("--snapshot-every", c.snapshot_every, "Write a checkpoint every N iterations");
  cmd->add_option("--snapshot-prefix", c.snapshot_prefix, "Checkpoints go to PREFIX_iter_N.ckpt (default: the model's name)");
  cmd->add_option("--resume", c.resume_path, "Continue from a checkpoint")->check(CLI::ExistingFile);
  cmd->add_option("--weights", c.weights,
                  "Start from trained weights, copied by layer name: .caffemodel, cgdp's --save or "
                  "checkpoint, or other safetensors with --weights-map (several: later files win)")
      ->delimiter(',')->check(CLI::ExistingFile)->excludes("--resume");
  cmd->add_option("--weights-map", c.weights_map,
                  "Lines 'tensor_name layer/index' naming another framework's safetensors tensors")
      ->check(CLI::ExistingFile);
  cmd->add_flag("--weights-allow-mismatch", c.weights_allow_mismatch,
                "Re-initialise layers whose stored shapes differ (fine-tuning a changed last layer)");
  cmd->add_flag("--plain", c.plain_output, "Plain progress lines even on a terminal");
  cmd->add_option("--sync", c.sync, "cgdp (default for > 1 device), ps0 (worker 0 is the server) or local");
  cmd->add_option("--chunk", c.chunk,
                  cat("cgdp chunk plan: layer, K, bytes:MB, all, boundaries b1,b2,..., or auto (search); "
                      "default: layer on cpu, bytes:", kDefaultCudaChunkMiB, " on cuda"));
  add_chunk_search_options(*cmd, c);
  cmd->add_option("--fc-exchange", c.fc_exchange,
                  "cgdp: InnerProduct weights as dense gradients summed on the host, or as "
                  "sufficient factors every worker rebuilds (Poseidon's SFB): dense, factors or "
                  "auto (the cost model with --profile/--chunk auto; else Poseidon's byte rule on "
                  "cuda, dense on cpu)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "dense", "factors"}));
  cmd->add_option(
         "--exchange-dtype", c.exchange_dtype,
         "cgdp: what summed chunks travel as: fp32, or bf16/fp16 (narrowed on the device, "
         "summed in fp32 on the host, rounded once; fp16 with a scale per chunk; across hosts the "
         "network carries fp32)")
      ->capture_default_str()
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}));
  cmd->add_option("--timeline", c.timeline_path, "Write a Chrome trace (Perfetto) of every stream");
  cmd->add_flag("--phase-table", c.phase_table, "Print the per-phase time table at the end");
  cmd->add_option("--hosts", c.hosts, "Scale out: host:port of every rank, the same list on every host")
      ->delimiter(',');
  cmd->add_option("--rank", c.rank, "This host's place in --hosts (its shard listens there)")
      ->capture_default_str();
  cmd->add_option("--token-file", c.token_file, "Cluster token file (default: $CGDP_CLUSTER_TOKEN)");
  cmd->add_option("--timeout-s", c.timeout_s, "Stop when a host or shard is silent this long")
      ->capture_default_str()->check(kPositive);
  cmd->add_option(
      "--master", c.master,
      "Under mpirun without --hosts: HOST:PORT where rank 0 tells the ranks each other's "
      "addresses (default: $CGDP_MASTER_ADDR); srun, and mpirun with every rank on this "
      "host, need none");
  cmd->add_option("--shard-port", c.shard_port,
                  "Under mpirun or srun: the port of a host's first rank's shard (the k-th: + k)")
      ->capture_default_str()->check(CLI::Range(1, 65535));
  return [f, cmd] {
    end_with_launcher();
    check_worker_count(f->config, f->oversubscribe);
    TrainConfig config = resolved_config(*f, *cmd);
    take_hosts_from_launcher(config, [](const char* name) { return std::getenv(name); }, stdout);
    Trainer trainer(config, stdout, measure_chunk_profile);
    trainer.run();
    return 0;
  };
}

}  // namespace cgdp::cli
