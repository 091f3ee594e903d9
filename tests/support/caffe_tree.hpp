// A Caffe root for tests: the published model and solver files (tests/data/caffe-models) copied
// into a temp folder, with small LMDBs and mean files written where they name them, so that the
// files run as published from that folder.
#pragma once

#include <filesystem>
#include <string>

#include "cgdp/data/image/lmdb_database.hpp"
#include "cgdp/data/image/lmdb_dataset.hpp"
#include "cgdp/data/image/mean_file.hpp"
#include "support/temp_dir.hpp"
#include "support/test_paths.hpp"

namespace cgdp::testing {

inline std::filesystem::path published_caffe_files() {
  return std::filesystem::path(testing::source_dir()) / "tests/data/caffe-models";
}

// `count` raw Datum records of C x H x W pixels, labels 0..classes-1 in turn, pixels a function
// of (record, place) so records differ.
inline void write_raw_lmdb(const std::filesystem::path& dir, int count, int channels, int height,
                           int width, int classes) {
  std::filesystem::create_directories(dir.parent_path());
  LmdbWriter db(dir.string());
  for (int i = 0; i < count; ++i) {
    Image image;
    image.height = height, image.width = width, image.channels = channels;
    image.pixels.resize(static_cast<size_t>(height) * width * channels);
    for (size_t p = 0; p < image.pixels.size(); ++p)
      image.pixels[p] = static_cast<uint8_t>((p * 7 + static_cast<size_t>(i) * 31) % 251);
    db.put(cat(i, "_record"), raw_datum(image, i % classes).SerializeAsString());
  }
  db.commit();
}

inline void write_flat_mean(const std::filesystem::path& path, int channels, int height, int width) {
  std::filesystem::create_directories(path.parent_path());
  MeanImage mean;
  mean.channels = channels, mean.height = height, mean.width = width, mean.images = 1;
  mean.values.assign(static_cast<size_t>(channels) * height * width, 100.f);
  write_mean_file(mean, path.string());
}

// The published files under root(), with MNIST-, CIFAR- and ImageNet-shaped databases (8 records
// each, 256x256 for ImageNet) and the mean files, at the paths the files name.
class CaffeTree {
 public:
  CaffeTree() {
    std::filesystem::copy(published_caffe_files(), dir_.path(), std::filesystem::copy_options::recursive);
    const auto& r = dir_.path();
    write_raw_lmdb(r / "examples/mnist/mnist_train_lmdb", 8, 1, 28, 28, 10);
    write_raw_lmdb(r / "examples/mnist/mnist_test_lmdb", 8, 1, 28, 28, 10);
    // The Siamese example's pairs: two 28x28 channels, labels 1 (same digit) or 0.
    write_raw_lmdb(r / "examples/siamese/mnist_siamese_train_leveldb", 8, 2, 28, 28, 2);
    write_raw_lmdb(r / "examples/siamese/mnist_siamese_test_leveldb", 8, 2, 28, 28, 2);
    write_raw_lmdb(r / "examples/cifar10/cifar10_train_lmdb", 8, 3, 32, 32, 10);
    write_raw_lmdb(r / "examples/cifar10/cifar10_test_lmdb", 8, 3, 32, 32, 10);
    write_flat_mean(r / "examples/cifar10/mean.binaryproto", 3, 32, 32);
    write_raw_lmdb(r / "examples/imagenet/ilsvrc12_train_lmdb", 8, 3, 256, 256, 1000);
    write_raw_lmdb(r / "examples/imagenet/ilsvrc12_val_lmdb", 8, 3, 256, 256, 1000);
    write_flat_mean(r / "data/ilsvrc12/imagenet_mean.binaryproto", 3, 256, 256);
  }
  const std::filesystem::path& root() const { return dir_.path(); }

 private:
  TempDir dir_;
};

}  // namespace cgdp::testing
