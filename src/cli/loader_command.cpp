// `cgdp loader`: the data loader alone on the training split, with training's image flags, to see
// how many images a second it decodes and transforms, and on how many threads.
#include <climits>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cgdp/core/error.hpp"
#include "cgdp/data/loader_rate.hpp"
#include "cgdp/data/open_dataset.hpp"
#include "cgdp/sync/topology.hpp"
#include "cli/commands.hpp"
#include "cli/number_checks.hpp"
#include "cli/train_flags.hpp"

namespace cgdp::cli {

namespace {

struct LoaderFlags {
  TrainFlags train;
  int channels = 3;
  int64_t batch = 256;
  double seconds = 5;
  int batches = 4;
  bool json = false;
};

// The topology's loader threads for one worker per GPU (or one CPU worker), as training would use.
int default_loader_threads() {
  const Topology topo = Topology::discover();
  std::vector<DeviceRef> workers;
  for (const GpuLocality& gpu : topo.gpus) workers.push_back({DeviceKind::Cuda, gpu.cuda_index});
  if (workers.empty()) workers.push_back({DeviceKind::Cpu, 0});
  return plan_placement(topo, workers, 0).loader_threads;
}

int run_loader(const LoaderFlags& f, const CLI::App& cmd) {
  TrainConfig config = f.train.config;
  resolve_image_flags(f.train, cmd, config);
  ImageOptions images = config.images;
  images.channels = f.channels;
  images.classes = INT_MAX;  // no model to bound the labels
  images.seed = config.seed;
  std::shared_ptr<const Dataset> data = open_dataset(config.data, Split::Train, {}, images);
  if (!data->decodes())
    throw UsageError(cat("--data ", config.data, ": the loader decodes images: give folder:, list: or lmdb:"));
  const int threads = config.loader_threads > 0 ? config.loader_threads : default_loader_threads();
  const LoaderRate r = measure_loader_rate(data, f.batch, threads, f.seconds, f.batches, config.seed);
  const std::string shape = shape_string(data->sample_shape());
  if (f.json) {
    std::cout << nlohmann::json{{"images_per_s", r.images_per_s},
                                {"threads", r.threads},
                                {"images_per_s_per_thread", r.images_per_s / r.threads},
                                {"images", r.images},
                                {"seconds", r.seconds},
                                {"sample_shape", shape},
                                {"data", config.data}}
                     .dump(2)
              << "\n";
  } else {
    std::printf("cgdp: loader: %.1f images/s on %d thread%s (%.1f per thread): %lld samples of %s "
                "from %s in %.1f s\n",
                r.images_per_s, r.threads, r.threads == 1 ? "" : "s", r.images_per_s / r.threads,
                static_cast<long long>(r.images), shape.c_str(), data->describe().c_str(), r.seconds);
  }
  return 0;
}

}  // namespace

Runner add_loader_command(CLI::App& app) {
  auto f = std::make_shared<LoaderFlags>();
  CLI::App* cmd = app.add_subcommand(
      "loader", "Measure the data loader alone: images/s with training's image flags");
  cmd->add_option("-d,--data", f->train.config.data, "folder:DIR, list:FILE[,ROOT] or lmdb:DIR")
      ->required()
      ->check(kNotEmpty);
  add_image_flags(cmd, f->train);
  cmd->add_option("--channels", f->channels, "1 (gray) or 3 (colour), as the model's input")
      ->capture_default_str();
  cmd->add_option("-b,--batch", f->batch, "Samples per batch")->capture_default_str()->check(kPositive);
  cmd->add_option("--seconds", f->seconds, "Measure at least this long")
      ->capture_default_str()
      ->check(kPositive & kFinite);
  cmd->add_option("--batches", f->batches, "and at least this many batches")->capture_default_str()->check(kPositive);
  cmd->add_option("--seed", f->train.config.seed, "Seed for the order and the random crops")->capture_default_str();
  cmd->add_flag("--json", f->json, "Print JSON instead of text");
  return [f, cmd] { return run_loader(*f, *cmd); };
}

}  // namespace cgdp::cli
