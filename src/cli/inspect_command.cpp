// `cgdp inspect`: per-layer output shapes and parameter counts of a model, as a table or JSON.
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "cgdp/cost/fc_exchange.hpp"
#include "cgdp/cost/profile.hpp"
#include "cgdp/device/cpu_device.hpp"
#include "cgdp/device/cuda_options.hpp"
#include "cgdp/io/file.hpp"
#include "cgdp/net/model_file.hpp"
#include "cgdp/net/net.hpp"
#include "cgdp/solver/update_rule.hpp"
#include "cgdp/train/data_feeds.hpp"
#include "cgdp/train/memory_estimate.hpp"
#include "cli/commands.hpp"
#include "cli/number_checks.hpp"

namespace cgdp::cli {

namespace {

struct InspectOptions {
  std::string model = "fashion_cnn";
  int64_t batch = 1;
  bool json = false;
  bool test_phase = false;
  bool memory = false;
  int devices = 1;
  std::string sync;  // empty: cgdp for several devices, else local (as train)
  int64_t test_batch = 0;  // 0: the batch, as train's default
  std::string data;  // replaces the data layers' sources
  std::vector<std::string> stages;  // both phases' (--stage)
  double device_memory_gb = 0;      // with --memory: plan the activations to fit this
  std::string profile;              // with a plan: predict what its copies cost
  // With --memory, as train counts them: CUDA workers also hold cuDNN's scratch and, in 16 bits,
  // the operands' 16-bit copies.
  std::string device_kind = "cpu";
  std::string precision = "fp32";
  std::string pack_activations = "auto";
  std::string fc_exchange = TrainConfig{}.fc_exchange;        // cgdp: which weights go as factors
  std::string exchange_dtype = TrainConfig{}.exchange_dtype;  // cgdp: 16 bits add device buffers
  std::string solver_type = "SGD";  // its histories: one, or two (AdaDelta, Adam)
  int64_t cudnn_workspace_mb = TrainConfig{}.cudnn_workspace_mb;
  // cuDNN's stored choices (train --cudnn-algorithms), keyed by the settings below as well.
  std::string cudnn_algorithms;
  bool tf32 = false;
  bool nondeterministic = false;
};

nlohmann::json fullest_step_json(const MemoryEstimate& m) {
  const auto [layer, pass] = step_of(m, m.arena_peak.step);
  nlohmann::json holders = nlohmann::json::array();
  for (const ArenaPeak::Holder& h : m.arena_peak.holders)
    holders.push_back({{"name", h.name}, {"bytes", h.bytes}});
  return {{"layer", layer}, {"pass", pass}, {"bytes", m.arena_peak.bytes}, {"holders", holders}};
}

nlohmann::json memory_json(const MemoryEstimate& m) {
  nlohmann::json workers = nlohmann::json::array();
  nlohmann::json peaks = nlohmann::json::array();
  for (int w = 0; w < m.workers; ++w) {
    workers.push_back(m.worker_bytes(w));
    peaks.push_back(m.worker_peak(w));
  }
  return {
      {"batch", m.batch},
      {"test_batch", m.test_batch},
      {"devices", m.workers},
      {"sync", to_string(m.sync)},
      {"parameters", m.parameters},
      {"gradients", m.gradients},
      {"momentum", m.history},
      {"solver_scratch", m.solver_scratch},
      {"activations", m.activations},
      {"layer_scratch", m.scratch},
      {"cudnn_scratch", m.cudnn_scratch},
      {"cudnn_scratch_from_stored_choices", m.cudnn_scratch_stored},
      {"half_operands", m.half_operands},
      {"exchange_narrow", m.exchange_narrow},
      {"exchange_factors", m.exchange_factors},
      {"test_net", m.test_net},
      {"test_half_operands", m.test_half_operands},
      {"worker_bytes", workers},
      {"worker_peak_bytes", peaks},
      {"host_pinned", m.pinned},
      {"total", m.device_total() + m.pinned},
      {"offload", m.planned ? nlohmann::json{{"arena", m.arena},
                                             {"activations", m.planned_units},
                                             {"offloaded", m.offloaded},
                                             {"packed", m.packed},
                                             {"packed_bytes", m.packed_bytes},
                                             {"rounded_bytes", m.rounded_bytes},
                                             {"read_packed", m.read_packed},
                                             {"written_over", m.written_over},
                                             {"host_bytes_per_worker", m.offload_host},
                                             {"history_host_bytes_per_worker", m.history_host},
                                             {"streamed_weights", m.streamed_layers},
                                             {"streamed_bytes_per_worker", m.streamed},
                                             {"bytes_each_way_per_micro_batch", m.offload_each_way},
                                             {"fullest_step", fullest_step_json(m)}}
                            : nlohmann::json(nullptr)}};
}

void print_memory(const MemoryEstimate& m) {
  std::printf("memory per worker (batch %lld, %d worker%s, %s):\n", static_cast<long long>(m.batch),
              m.workers, m.workers > 1 ? "s" : "", to_string(m.sync));
  auto row = [](const char* what, int64_t bytes) {
    std::printf("  %-28s %12s\n", what, format_bytes(bytes).c_str());
  };
  row("parameters", m.parameters);
  row("gradients", m.gradients);
  row(m.history_on_host() ? "momentum's device stage" : "momentum (updating workers)", m.history);
  row("activations", m.activations);
  row("layer scratch", m.scratch);
  if (m.solver_scratch > 0) row("solver's scratch (updating)", m.solver_scratch);
  if (m.cudnn_scratch > 0 || m.cudnn_scratch_stored)
    row(m.cudnn_scratch_stored ? "cuDNN scratch (stored choices)" : "cuDNN scratch",
        m.cudnn_scratch);
  if (m.half_operands > 0) row("16-bit operand copies", m.half_operands);
  if (m.exchange_narrow > 0) row("16-bit exchange buffers", m.exchange_narrow);
  if (m.exchange_factors > 0) row("sufficient factors' rows", m.exchange_factors);
  std::printf("  %-28s %12s  (test batch %lld)\n", "test net (worker 0)", format_bytes(m.test_net).c_str(),
              static_cast<long long>(m.test_batch));
  if (m.test_half_operands > 0) row("its 16-bit copies (worker 0)", m.test_half_operands);
  for (int w = 0; w < m.workers; ++w)
    std::printf(
        "  %-28s %12s  (%s)\n", cat("worker ", w, " device").c_str(),
        format_bytes(m.worker_bytes(w)).c_str(),
        m.worker_peak(w) > m.worker_bytes(w)
            ? cat(format_bytes(m.worker_peak(w)), " at its peak, while nets are built").c_str()
            : "also its peak: building the nets holds less");
  row(m.planned ? "host sums, offload (pinned)" : "host sums (pinned)", m.pinned);
  row("total", m.device_total() + m.pinned);
  if (m.planned) {
    std::printf("plan: %s\n", describe_offload(m).c_str());
    std::printf("%s\n", describe_arena_peak(m).c_str());
  }
}

nlohmann::json describe(Net<float>& net) {
  nlohmann::json layers = nlohmann::json::array();
  for (int i = 0; i < net.num_layers(); ++i) {
    auto& layer = net.layer(i);
    int64_t params = 0;
    for (auto& p : layer.params()) params += p->count();
    nlohmann::json tops = nlohmann::json::object();
    for (size_t j = 0; j < net.tops(i).size(); ++j)
      tops[net.top_names(i)[j]] = net.tops(i)[j]->shape();
    layers.push_back(
        {{"name", layer.name()}, {"type", layer.type()}, {"tops", tops}, {"params", params}});
  }
  return {{"model", net.name()},
          {"batch", net.batch_size()},
          {"layers", layers},
          {"total_params", net.learnable_count()}};
}

void print_table(const nlohmann::json& d) {
  std::printf("%-36s %-18s %-24s %14s\n", "layer", "type", "output", "params");
  for (const auto& l : d["layers"]) {
    std::string shapes;
    for (const auto& [name, shape] : l["tops"].items()) {
      std::string s;
      for (const auto& dim : shape) {
        if (!s.empty()) s += 'x';
        s += std::to_string(dim.get<int64_t>());
      }
      if (!shapes.empty()) shapes += ' ';
      shapes += s;
    }
    std::printf("%-36s %-18s %-24s %14lld\n", l["name"].get<std::string>().c_str(),
                l["type"].get<std::string>().c_str(), shapes.c_str(),
                static_cast<long long>(l["params"].get<int64_t>()));
  }
  std::printf("total learnable parameters: %lld\n",
              static_cast<long long>(d["total_params"].get<int64_t>()));
}

}  // namespace

Runner add_inspect_command(CLI::App& app) {
  auto opt = std::make_shared<InspectOptions>();
  CLI::App* cmd =
      app.add_subcommand("inspect", "Print per-layer output shapes and parameter counts");
  cmd->add_option("-m,--model", opt->model, "Model file, or a name from models/")
      ->capture_default_str();
  cmd->add_option("-b,--batch", opt->batch, "Batch size for the shapes")
      ->capture_default_str()
      ->check(kPositive);
  cmd->add_flag("--json", opt->json, "Print JSON instead of a table");
  cmd->add_flag("--test", opt->test_phase, "Build the TEST phase of the model");
  cmd->add_flag("--memory", opt->memory,
                "Print what a training run allocates per worker (as `train` checks it before starting)");
  cmd->add_option("-n,--devices", opt->devices, "With --memory: data-parallel workers")
      ->capture_default_str()->check(kPositive);
  cmd->add_option("--sync", opt->sync, "With --memory: cgdp, ps0 or local (default as train)");
  cmd->add_option("--device-memory-gb", opt->device_memory_gb,
                  "With --memory: a device of this size; a run that does not fit shows the plan "
                  "that `train --offload auto` makes (activations by liveness, some on the host)")
      ->check(kPositive);
  cmd->add_option("--test-batch", opt->test_batch, "With --memory: the test net's batch (default: the TEST data layer's batch_size, else --batch, as train)")
      ->check(kPositive);
  cmd->add_option("--device-kind", opt->device_kind,
                  "With --memory: the workers' devices, cpu or cuda (which also hold cuDNN's "
                  "scratch and, in 16 bits, the operands' copies)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  cmd->add_option("--precision", opt->precision,
                  "With --memory: the layers' precision, as train's");
  cmd->add_option("--fc-exchange", opt->fc_exchange,
                  "With --memory and cgdp: auto, dense or factors, as train's without --chunk "
                  "auto (factors keep their rows on every worker)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "dense", "factors"}));
  cmd->add_option("--exchange-dtype", opt->exchange_dtype,
                  "With --memory and cgdp: fp32, bf16 or fp16, as train's (16 bits keep narrowed "
                  "copies on every worker)")
      ->capture_default_str()
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}));
  cmd->add_option("--solver-type", opt->solver_type,
                  "With --memory: the solver, as train's (AdaDelta and Adam keep two histories)")
      ->capture_default_str();
  cmd->add_option("--pack-activations", opt->pack_activations,
                  "With --memory --precision bf16/fp16: auto, on, exact or off, as train's")
      ->check(CLI::IsMember({"auto", "on", "exact", "off"}))
      ->capture_default_str();
  cmd->add_option("--cudnn-workspace-mb", opt->cudnn_workspace_mb,
                  "With --memory --device-kind cuda: cuDNN's scratch cap, as train's")
      ->check(kNonNegative);
  cmd->add_option("--cudnn-algorithms", opt->cudnn_algorithms,
                  "With --memory --device-kind cuda: cuDNN's choices a run stored (train "
                  "--cudnn-algorithms): when they hold every convolution pass, no search runs and "
                  "cuDNN's scratch is what they need")
      ->check(CLI::ExistingFile);
  cmd->add_flag("--tf32", opt->tf32,
                "With --cudnn-algorithms: as train's (the choices are keyed by it)");
  cmd->add_flag("--nondeterministic", opt->nondeterministic,
                "With --cudnn-algorithms: as train's (the choices are keyed by it)");
  cmd->add_option("--profile", opt->profile,
                  "With --device-memory-gb: a profile (cgdp profile) to predict what the plan's "
                  "copies cost a pass")
      ->check(CLI::ExistingFile);
  cmd->add_option("-d,--data", opt->data,
                  "For a model with data layers: read the sample shape from this source instead of "
                  "theirs (synthetic:C,H,W,K gives a shape without data)")
      ->check(kNotEmpty);
  cmd->add_option("--stage", opt->stages,
                  "The net's stages (Caffe's -stage): layers whose rules name a stage are kept "
                  "only with it")
      ->delimiter(',');
  return [opt] {
    const std::string path = find_model_file(opt->model);
    auto param = load_model(path);
    TrainConfig feeds;
    feeds.data = opt->data;
    for (const std::string& stage : opt->stages) {
      feeds.train_state.add_stage(stage);
      feeds.test_state.add_stage(stage);
    }
    const DataFeeds fed = plan_data_feeds(param, path, feeds);  // data layers become Inputs of their data's shape
    if (opt->memory || opt->test_phase) require_test_net(fed, path);
    if (!fed.test_needs_stage.empty())  // as Caffe, which builds the TRAIN net there
      std::fprintf(stderr, "cgdp: note: %s: %s; shown: the TRAIN net\n", path.c_str(),
                   fed.test_needs_stage.c_str());
    if (opt->memory) {
      const int64_t test_batch = test_batch_size(fed, opt->test_batch, opt->batch);  // as train
      const SyncKind sync = !opt->sync.empty() ? parse_sync_kind(opt->sync)
                                               : (opt->devices > 1 ? SyncKind::Cgdp : SyncKind::Local);
      const DeviceKind kind = opt->device_kind == "cuda" ? DeviceKind::Cuda : DeviceKind::Cpu;
      const int gpus = kind == DeviceKind::Cuda ? opt->devices : 0;  // a GPU per worker
      const Precision precision = parse_precision(opt->precision);
      proto::SolverParameter solver;
      solver.set_type(opt->solver_type);
      const int histories = make_solver_settings(solver, "--solver-type").histories();
      const ScopedLayerPrecision layers_in(precision);  // the nets built below pack in 16 bits
      // As train sets them: stored choices are keyed by them.
      set_cuda_options(
          {opt->tf32, static_cast<size_t>(opt->cudnn_workspace_mb) << 20, !opt->nondeterministic});
      const ExchangeDtype dtype = parse_exchange_dtype(opt->exchange_dtype);
      ConvAlgorithmTable choices;
      if (!opt->cudnn_algorithms.empty())
        choices.merge_text(read_file(opt->cudnn_algorithms), opt->cudnn_algorithms);
      const auto estimate = [&](ActivationMemoryPlan activations) {
        activations.pack = packing_of(opt->pack_activations, kind);
        MemoryEstimate m = estimate_memory(param, path, opt->batch, test_batch, opt->devices, sync,
                                           histories, nullptr, "", activations, kind);
        add_cuda_scratch(m, kind, opt->cudnn_workspace_mb, precision,
                         opt->cudnn_algorithms.empty() ? nullptr : &choices);
        add_exchange_buffers(m, sync, dtype);
        add_factor_buffers(m, sync,
                           factored_without_model(m.params, parse_fc_exchange(opt->fc_exchange),
                                                  kind, opt->batch, opt->devices),
                           1, opt->devices, dtype);
        return m;
      };
      MemoryEstimate m =
          estimate(default_activation_memory(precision, opt->pack_activations, kind));
      const int64_t budget = static_cast<int64_t>(opt->device_memory_gb * (1LL << 30));
      // As train plans it under --device-memory-gb.
      std::optional<Profile> profile;  // as train's --profile: the cheaper plan, and its cost
      if (!opt->profile.empty()) profile = read_profile(opt->profile);
      if (opt->device_memory_gb > 0 && needed_bytes(m, kind, gpus, BudgetScope::Device) > budget)
        m = fit_offload(estimate, kind, gpus, budget, BudgetScope::Device,
                        profile ? &*profile : nullptr)
                .estimate;
      if (opt->json)
        std::cout << memory_json(m).dump(2) << "\n";
      else
        print_memory(m);
      if (opt->device_memory_gb > 0) {
        const int64_t need = needed_bytes(m, kind, gpus, BudgetScope::Device);
        std::fprintf(opt->json ? stderr : stdout,
                     "%s: worker 0 needs %s of --device-memory-gb %g (%s)\n",
                     need <= budget ? "fits" : "does not fit", format_bytes(need).c_str(),
                     opt->device_memory_gb, format_bytes(budget).c_str());
        if ((m.offloaded > 0 || m.history_on_host() || m.streamed > 0) && profile) {
          const OffloadPassCost cost = predict_offload(m, *profile);
          std::fprintf(opt->json ? stderr : stdout,
                       "predicted pass: %.1f ms, %.1f ms without the copies, %.1f ms staging the "
                       "history at the step, %.1f ms streaming weights (%+.1f%%), from %s\n",
                       cost.pass_us / 1e3, cost.compute_us / 1e3, cost.history_us / 1e3,
                       cost.streamed_us / 1e3, 100 * cost.slowdown(), opt->profile.c_str());
        }
        if (need > budget) return 1;
      }
      return 0;
    }
    Net<float> net(param, opt->test_phase ? Phase::Test : Phase::Train, default_cpu_device(),
                   opt->batch, 1, path);
    const auto d = describe(net);
    if (opt->json)
      std::cout << d.dump(2) << "\n";
    else
      print_table(d);
    return 0;
  };
}

}  // namespace cgdp::cli
