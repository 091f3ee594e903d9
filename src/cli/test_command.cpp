// `cgdp test` (caffe test): trained weights scored by the model's TEST net on the test data, every
// scalar output (accuracy, top-k, losses) averaged over the samples, as the trainer tests.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cgdp/core/error.hpp"
#include "cgdp/train/trainer.hpp"
#include "cli/commands.hpp"
#include "cli/number_checks.hpp"
#include "cli/train_flags.hpp"

namespace cgdp::cli {

namespace {

struct TestFlags {
  TrainFlags train;
  int64_t batches = 0;  // Caffe's -iterations: test batches
  bool json = false;
};

void print_evaluation(const Trainer::Evaluation& e, const TrainConfig& c, bool json) {
  if (json) {
    nlohmann::ordered_json out = {{"samples", e.samples}};
    if (e.accuracy) out["accuracy"] = *e.accuracy;
    if (e.loss) out["loss"] = *e.loss;
    for (const auto& [name, value] : e.outputs) out["outputs"][name] = value;
    std::printf("%s\n", out.dump().c_str());
    return;
  }
  std::printf("cgdp: test of %s on %d samples\n", c.model.c_str(), static_cast<int>(e.samples));
  if (e.accuracy) std::printf("  accuracy = %.6g\n", *e.accuracy);
  if (e.loss) std::printf("  loss = %.6g\n", *e.loss);
  for (const auto& [name, value] : e.outputs) std::printf("  %s = %.6g\n", name.c_str(), value);
}

}  // namespace

Runner add_test_command(CLI::App& app) {
  auto f = std::make_shared<TestFlags>();
  TrainConfig& c = f->train.config;
  CLI::App* cmd = app.add_subcommand(
      "test", "Score trained weights with the model's TEST net on the test data (as caffe test)");
  add_workload_flags(cmd, f->train);
  cmd->add_option("--weights", c.weights,
                  "The trained weights, copied by layer name: .caffemodel, cgdp's --save or "
                  "checkpoint, or other safetensors with --weights-map (several: later files win)")
      ->delimiter(',')
      ->check(CLI::ExistingFile)
      ->required();
  cmd->add_option("--weights-map", c.weights_map,
                  "Lines 'tensor_name layer/index' naming another framework's safetensors tensors")
      ->check(CLI::ExistingFile);
  cmd->add_option(
         "--test-batch", c.test_batch,
         "Samples per test batch (default: the TEST data layer's batch_size, else --batch)")
      ->check(kPositive);
  cmd->add_option("-i,--iterations", f->batches,
                  "Test batches (caffe test's -iterations; default: the whole test split)")
      ->check(kPositive);
  cmd->add_option("--samples", c.test_samples, "The first N test samples (instead of --iterations)")
      ->excludes("--iterations")
      ->check(kPositive);
  cmd->add_option("--stage", f->train.test_stages,
                  "The test net's stages (caffe test's -stage): layers whose rules name a stage "
                  "are kept only with it")
      ->delimiter(',');
  cmd->add_flag("--json", f->json, "Print one JSON object: samples, accuracy, loss, outputs");
  return [f, cmd] {
    TrainConfig config = resolved_config(f->train, *cmd);
    config.devices = 1;  // the test runs on the first worker
    config.iterations = 1;
    config.test_iter = f->batches;
    // --json: stdout holds the one object; the trainer's notes go to stderr.
    Trainer trainer(config, f->json ? stderr : stdout);
    const WeightsReport& report = trainer.weights_report();
    if (!report.missing.empty())
      throw UsageError(cat("the weights leave ", report.missing.size(), " layer(s) of ",
                           config.model, " without values (", report.missing.front(),
                           report.missing.size() > 1 ? ", ..." : "",
                           "): the test would score their random initial values"));
    print_evaluation(trainer.evaluate(), config, f->json);
    return 0;
  };
}

}  // namespace cgdp::cli
