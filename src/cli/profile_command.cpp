// `cgdp profile`: measures the costs the cost model predicts from (cost/profiler.hpp) with the
// trainer's flags, prints a short summary and writes the profile as JSON.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "cgdp/core/error.hpp"
#include "cgdp/io/file.hpp"
#include "cgdp/launchers/launcher_env.hpp"
#include "cgdp/measure/profiler.hpp"
#include "cli/commands.hpp"
#include "cli/layer_table.hpp"
#include "cli/train_flags.hpp"

namespace cgdp::cli {

namespace {

struct ProfileFlags {
  TrainFlags train;
  ProfileOptions options;
  std::string out;
};

// The layers that cost most (forward + backward), then totals and every other figure.
void print_summary(const Profile& p, FILE* out) {
  std::fprintf(
      out, "cgdp: profile of %s on %d %s worker(s) (first: %s), batch %d each, %d host threads\n",
      p.model.c_str(), p.devices, p.backend.c_str(), p.device.c_str(), p.batch, p.host_threads);
  std::vector<const LayerCost*> layers;
  for (const LayerCost& l : p.layers) layers.push_back(&l);
  const auto cost = [](const LayerCost* l) { return l->forward_us + l->backward_us; };
  std::stable_sort(layers.begin(), layers.end(),
                   [&](auto* a, auto* b) { return cost(a) > cost(b); });
  layers.resize(std::min<size_t>(layers.size(), 8));
  print_layer_table(layers, p.layers, "layer (costliest)", out);
  for (const auto& [name, link] : {std::pair{"d2h", p.d2h}, {"h2d", p.h2d}, {"p2p", p.p2p}})
    std::fprintf(out, "  copy %-4s %8.2f GB/s  latency %8.2f us\n", name, link.gbps,
                 link.latency_us);
  if (p.host_memory_gbps > 0)
    std::fprintf(out, "  copies at once share %.2f GB/s of host memory\n", p.host_memory_gbps);
  std::fprintf(out, "  sync point %.1f us; update %.2f GB/s; device sum %.2f GB/s\n", p.sync_us,
               p.update_gbps, p.device_sum_gbps);
  if (p.overlap_us_per_mb > 0)
    std::fprintf(out, "  exchange beside backward: %.2f us per MB\n", p.overlap_us_per_mb);
  if (p.shared_cores > 0)
    std::fprintf(out,
                 "  exchange on %d shared cores: contention factor %.2f, stretched %.2fx beside "
                 "backward\n",
                 p.shared_cores, p.contention_factor, p.exchange_stretch);
  std::string sums;
  for (const HostSumCost& s : p.host_sum) {
    char item[48];
    std::snprintf(item, sizeof item, "%s%d: %.2f", sums.empty() ? "" : ", ", s.inputs, s.gbps);
    sums += item;
  }
  std::fprintf(out, "  host sum GB/s of one input, by inputs: %s\n", sums.c_str());
}

}  // namespace

Runner add_profile_command(CLI::App& app) {
  auto f = std::make_shared<ProfileFlags>();
  CLI::App* cmd =
      app.add_subcommand("profile", "Measure the costs `cgdp predict` works from, on this machine");
  add_workload_flags(cmd, f->train);
  cmd->add_option("-i,--iterations", f->options.iterations,
                  "Measured training iterations (medians over them)")
      ->capture_default_str();
  cmd->add_option("--warmup", f->options.warmup, "Training iterations before measuring")
      ->capture_default_str();
  cmd->add_option("--repeats", f->options.repeats, "Repetitions of each copy and sum size")
      ->capture_default_str();
  cmd->add_option("--sum-inputs", f->options.sum_inputs,
                  "Time host sums of 1..N inputs (default: the worker count)")
      ->check(CLI::Range(1, 64));
  cmd->add_option("-o,--out", f->out, "Write the profile here (JSON)")->required();
  return [f, cmd] {
    const std::filesystem::path out(f->out);
    const auto dir = out.parent_path().empty() ? std::filesystem::path(".") : out.parent_path();
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec))
      throw IoError(cat(f->out, ": no directory ", dir.string()));
    check_worker_count(f->train.config, f->train.oversubscribe);
    // Started on several hosts by mpirun or srun: each profiles its own machine and rank r > 0
    // writes beside rank 0's file, so that a shared directory keeps every host's.
    const auto launched = detect_launcher([](const char* name) { return std::getenv(name); });
    const std::string path = rank_file_path(f->out, launched ? launched->rank : 0);
    const Profile profile = measure_profile(resolved_config(f->train, *cmd), f->options);
    print_summary(profile, stdout);
    write_profile(profile, path);
    std::printf("cgdp: wrote %s\n", path.c_str());
    return 0;
  };
}

}  // namespace cgdp::cli
