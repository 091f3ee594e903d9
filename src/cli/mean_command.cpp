// `cgdp mean`: the mean image of a training set, as Caffe's compute_image_mean writes it.
#include <climits>
#include <cstdio>
#include <thread>
#include <tuple>

#include "cgdp/core/error.hpp"
#include "cgdp/data/image/image_mean.hpp"
#include "cgdp/data/open_dataset.hpp"
#include "cli/commands.hpp"
#include "cli/number_checks.hpp"

namespace cgdp::cli {

namespace {

struct MeanOptions {
  std::string data, out, resize;
  bool gray = false;
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
};

int run_mean(const MeanOptions& o) {
  ImageOptions images;
  images.channels = o.gray ? 1 : 3;
  images.classes = INT_MAX;  // labels are not averaged; any is fine
  if (!o.resize.empty()) std::tie(images.resize_height, images.resize_width) = parse_size(o.resize, "--resize");
  const std::unique_ptr<Dataset> data = open_dataset(o.data, Split::Train, {}, images);
  const auto* source = dynamic_cast<const ImageSourceDataset*>(data.get());
  if (!source)
    throw UsageError(cat("--data ", o.data, ": a mean is of images: give folder:, list: or lmdb:"));
  const MeanImage mean = compute_image_mean(*source, o.threads);
  write_mean_file(mean, o.out);
  std::string averages;
  const size_t plane = static_cast<size_t>(mean.height) * mean.width;
  for (int c = 0; c < mean.channels; ++c) {
    double sum = 0;
    for (size_t i = 0; i < plane; ++i) sum += mean.values[c * plane + i];
    const char* name = mean.channels == 3 ? (c == 0 ? "B " : c == 1 ? "G " : "R ") : "";
    averages += cat(c ? ", " : "", name, static_cast<int>(sum / plane * 10) / 10.0);
  }
  std::printf("cgdp: wrote %s: the %dx%dx%d mean of %lld images (channel averages %s)\n",
              o.out.c_str(), mean.channels, mean.height, mean.width,
              static_cast<long long>(mean.images), averages.c_str());
  return 0;
}

}  // namespace

Runner add_mean_command(CLI::App& app) {
  auto o = std::make_shared<MeanOptions>();
  CLI::App* cmd = app.add_subcommand(
      "mean", "Write the mean image of a training set (as Caffe's compute_image_mean), for --mean-file");
  cmd->add_option("-d,--data", o->data,
                  "folder:DIR, list:FILE[,ROOT] or lmdb:DIR; its training split")
      ->required()
      ->check(kNotEmpty);
  cmd->add_option("-o,--out", o->out, "The .binaryproto to write (replaced atomically)")->required();
  cmd->add_option("--resize", o->resize, "Resize every image to HxW first (as training will)");
  cmd->add_flag("--gray", o->gray, "Average one channel instead of three");
  cmd->add_option("--threads", o->threads, "Decoding threads")
      ->capture_default_str()
      ->check(count_check(kMaxThreads));
  return [o] { return run_mean(*o); };
}

}  // namespace cgdp::cli
