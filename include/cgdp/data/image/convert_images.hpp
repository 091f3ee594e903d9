// `cgdp convert`: image files (a folder tree or a list) into Caffe LMDBs, the counterpart of
// Caffe's convert_imageset.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace cgdp {

struct ConvertOptions {
  std::string from;  // folder:DIR or list:FILE[,ROOT]
  std::string to;    // lmdb:OUT (a folder: OUT/train_lmdb and OUT/val_lmdb; a list: OUT itself)
  int resize_height = 0, resize_width = 0;
  bool encoded = false;  // keep the files' bytes (re-encoded as JPEG when resized)
  bool gray = false;     // raw records of one channel instead of three
  bool shuffle = false;  // records in a seeded random order, as convert_imageset --shuffle
  uint64_t seed = 1;
};

struct ConvertedDatabase {
  std::string path;
  int64_t records = 0;
};

std::vector<ConvertedDatabase> convert_images(const ConvertOptions& options);

}  // namespace cgdp
