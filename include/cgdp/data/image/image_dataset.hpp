// A Dataset of image files (a folder tree or a list file), decoded and transformed as it is read.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "cgdp/core/error.hpp"

#include "cgdp/data/dataset.hpp"
#include "cgdp/data/image/caffe_transform.hpp"
#include "cgdp/data/image/image_list.hpp"

namespace cgdp {

struct ImageOptions {
  int resize_height = 0, resize_width = 0;  // Caffe's new_height/new_width; 0: as stored
  CaffeTransform transform;                 // crop, mirror, mean, scale
  // Filled by whoever opens the data (the trainer, from the model's Input):
  int channels = 0;            // 1: gray, 3: colour (BGR out, as Caffe)
  int height = 0, width = 0;   // the model's input: what every sample must come out as
  int classes = 0;             // the model's classes: LMDB labels must lie below
  bool skip_bad = false;       // an unreadable image is replaced by the next readable sample
  bool train = true;           // random crops and mirrors; the test split takes the centre
  uint64_t seed = 1;
};

// The sample shape `options` give: the crop, else the resize, else the model's input.
std::pair<int, int> sample_size(const ImageOptions& options);

// Resizes (when asked), checks the size and applies the transform with the draw of (seed, epoch,
// index): the part every image source shares. `image` is as decoded (HWC, RGB or gray).
void transform_sample(Image image, const ImageOptions& options, int64_t index, int64_t epoch,
                      float* out);

// Counts the reads --skip-bad-images replaced, keeping the first reason; thread-safe.
class SkippedImages {
 public:
  void note(const std::string& why);
  // "replaced 3 reads of unreadable images by the next sample (first: PATH: why)", or "".
  std::string summary(const std::string& source) const;

 private:
  mutable std::mutex mutex_;
  int64_t count_ = 0;
  std::string first_;
};

// Reads sample `index` through `read_one`; with `skip_bad`, an unreadable sample is replaced by
// the next one that reads (noted in `skipped`), so a batch keeps its size and its order.
template <typename ReadOne>
void read_or_skip(int64_t index, int64_t size, bool skip_bad, SkippedImages& skipped, ReadOne read_one) {
  for (int64_t tries = 0;; ++tries) {
    try {
      read_one((index + tries) % size);
      return;
    } catch (const DataError& e) {
      if (!skip_bad || tries + 1 >= size) throw;
      skipped.note(e.what());
    }
  }
}

class ImageDataset final : public Dataset {
 public:
  ImageDataset(ImageList list, ImageOptions options, std::string description);

  std::string describe() const override { return description_; }
  int64_t size() const override { return static_cast<int64_t>(list_.entries.size()); }
  Shape sample_shape() const override { return {options_.channels, out_height_, out_width_}; }
  int num_classes() const override { return list_.num_classes; }
  void read(int64_t index, float* image_out, float* label_out) const override {
    read_for_epoch(index, 0, image_out, label_out);
  }
  void read_for_epoch(int64_t index, int64_t epoch, float* image_out, float* label_out) const override;
  std::string skipped_summary() const override { return skipped_->summary(description_); }

  const ImageList& list() const { return list_; }

 private:
  void read_one(int64_t index, int64_t epoch, float* image_out, float* label_out) const;

  ImageList list_;
  ImageOptions options_;
  std::string description_;
  int out_height_ = 0, out_width_ = 0;
  std::unique_ptr<SkippedImages> skipped_ = std::make_unique<SkippedImages>();
};

}  // namespace cgdp
