// `cgdp convert`: image folders or lists into Caffe LMDBs (convert_imageset's job).
#include <cstdio>
#include <tuple>

#include "cgdp/core/error.hpp"
#include "cgdp/data/image/convert_images.hpp"
#include "cli/commands.hpp"
#include "cli/number_checks.hpp"

namespace cgdp::cli {

Runner add_convert_command(CLI::App& app) {
  auto o = std::make_shared<ConvertOptions>();
  auto resize = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand(
      "convert", "Write image files into Caffe LMDBs (as Caffe's convert_imageset)");
  cmd->add_option("--from", o->from, "folder:DIR (train/ and val/ of class folders) or list:FILE[,ROOT]")
      ->required();
  cmd->add_option("--to", o->to, "lmdb:OUT (a folder gives OUT/train_lmdb and OUT/val_lmdb); never overwritten")
      ->required();
  cmd->add_option("--resize", *resize, "Resize every image to HxW first");
  cmd->add_flag("--encoded", o->encoded, "Store the image files' bytes (JPEG when resized) instead of pixels");
  cmd->add_flag("--gray", o->gray, "Store one channel instead of three (raw records)");
  cmd->add_flag("--shuffle", o->shuffle, "Store the records in a seeded random order");
  cmd->add_option("--seed", o->seed, "Seed for --shuffle")->capture_default_str();
  return [o, resize] {
    if (!resize->empty()) std::tie(o->resize_height, o->resize_width) = parse_size(*resize, "--resize");
    for (const ConvertedDatabase& db : convert_images(*o))
      std::printf("cgdp: wrote %s: %lld records\n", db.path.c_str(), static_cast<long long>(db.records));
    return 0;
  };
}

}  // namespace cgdp::cli
