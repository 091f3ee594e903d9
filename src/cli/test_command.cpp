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

nlohmann::ordered_json evaluation_json(const Trainer::Evaluation& e) {
  nlohmann::ordered_json out;
  if (!e.net.empty()) out["net"] = e.net;
  out["samples"] = e.samples;
  if (e.accuracy) out["accuracy"] = *e.accuracy;
  if (e.loss) out["loss"] = *e.loss;
  for (const auto& [name, value] : e.outputs) out["outputs"][name] = value;
  return out;
}

// One test net: its figures; several (a solver's test_state, repeated): each by its number.
void print_evaluations(const std::vector<Trainer::Evaluation>& all, const TrainConfig& c,
                       bool json) {
  if (json) {
    nlohmann::ordered_json out = evaluation_json(all[0]);
    if (all.size() > 1) {
      out = {{"nets", nlohmann::ordered_json::array()}};
      for (const auto& e : all) out["nets"].push_back(evaluation_json(e));
    }
    std::printf("%s\n", out.dump().c_str());
    return;
  }
  for (const Trainer::Evaluation& e : all) {
    std::printf("cgdp: test of %s%s on %d samples\n", c.model.c_str(),
                e.net.empty() ? "" : cat(", test net ", e.net).c_str(),
                static_cast<int>(e.samples));
    if (e.accuracy) std::printf("  accuracy = %.6g\n", *e.accuracy);
    if (e.loss) std::printf("  loss = %.6g\n", *e.loss);
    for (const auto& [name, value] : e.outputs) std::printf("  %s = %.6g\n", name.c_str(), value);
  }
}

}  // namespace

Runner add_test_command(CLI::App& app) {
  auto f = std::make_shared<TestFlags>();
  TrainConfig& c = f->train.config;
  CLI::App* cmd = app.add_subcommand(
      "test",
      "Score trained weights with the model's TEST net on the test data (as caffe test); a "
      "deploy file (no labels read) is scored by a SoftmaxWithLoss and an Accuracy added on its "
      "output, labels from --data");
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
                  "Test batches of every test net (caffe test's -iterations; default: a solver's "
                  "test_iter, else the whole test split)")
      ->check(kPositive);
  cmd->add_option("--samples", c.test_samples, "The first N test samples (instead of --iterations)")
      ->excludes("--iterations")
      ->check(kPositive);
  cmd->add_option("--solver", f->train.solver_file,
                  "Caffe solver file: its net and test nets (test_state, test_iter); flags "
                  "override its fields")
      ->check(CLI::ExistingFile);
  cmd->add_option("--stage", f->train.test_stages,
                  "The test net's stages (caffe test's -stage): layers whose rules name a stage "
                  "are kept only with it")
      ->delimiter(',');
  cmd->add_flag("--json", f->json, "Print one JSON object: samples, accuracy, loss, outputs");
  return [f, cmd] {
    TrainConfig config = resolved_config(f->train, *cmd);
    config.devices = 1;  // the test runs on the first worker
    config.iterations = 1;
    config.score_deploy_net = true;
    if (f->batches > 0) {  // else a solver's test_iter, or the whole test split
      config.test_iter = f->batches;
      for (TrainConfig::MoreTestNet& net : config.more_test_nets) net.iterations = f->batches;
    }
    // --json: stdout holds the one object; the trainer's notes go to stderr.
    Trainer trainer(config, f->json ? stderr : stdout);
    if (!trainer.scoring_note().empty())
      std::fprintf(f->json ? stderr : stdout, "cgdp: %s\n", trainer.scoring_note().c_str());
    const WeightsReport& report = trainer.weights_report();
    if (!report.missing.empty())
      throw UsageError(cat("the weights leave ", report.missing.size(), " layer(s) of ",
                           config.model, " without values (", report.missing.front(),
                           report.missing.size() > 1 ? ", ..." : "",
                           "): the test would score their random initial values"));
    print_evaluations(trainer.evaluate_all(), config, f->json);
    return 0;
  };
}

}  // namespace cgdp::cli
