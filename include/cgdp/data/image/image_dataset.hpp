// Datasets of images decoded and transformed as they are read: files (a folder tree or a list
// file) here, Caffe LMDB records in lmdb_dataset.hpp; both share ImageSourceDataset.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "cgdp/data/dataset.hpp"
#include "cgdp/data/image/caffe_transform.hpp"
#include "cgdp/data/image/image_list.hpp"
#include "cgdp/data/image/random_resized_crop.hpp"

namespace cgdp {

struct ImageOptions {
  int resize_height = 0, resize_width = 0;  // Caffe's new_height/new_width; 0: as stored
  CaffeTransform transform;                 // crop, mirror, mean, scale (std: cgdp's)
  // torchvision's recipe instead of Caffe's crop (size > 0): RGB out, transform's mirror,
  // mean_values, std_values and scale apply; resize and crop_size must be unset.
  RandomResizedCrop random_resized_crop;
  // Filled by whoever opens the data (the trainer, from the model's Input):
  int channels = 0;            // 1: gray, 3: colour (BGR out, as Caffe)
  int height = 0, width = 0;   // the model's input: what every sample must come out as
  int classes = 0;             // the model's classes: LMDB labels must lie below
  bool skip_bad = false;       // an unreadable image is replaced by the next readable sample
  bool train = true;           // random crops and mirrors; the test split takes the centre
  uint64_t seed = 1;
};

// The sample shape `options` give: the random resized crop or the crop, else the resize, else the
// model's input.
std::pair<int, int> sample_size(const ImageOptions& options);

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

// One image sample per index: load (decode), then resize and transform with the draw of
// (seed, epoch, index). Errors name where the sample lies; with skip_bad, an unreadable sample
// (DataError or IoError) is replaced by the next one that reads, so a batch keeps its size.
class ImageSourceDataset : public Dataset {
 public:
  ImageSourceDataset(ImageOptions options, std::string description);

  std::string describe() const override { return description_; }
  Shape sample_shape() const override;
  void read(int64_t index, float* image_out, float* label_out) const override {
    read_for_epoch(index, 0, image_out, label_out);
  }
  void read_for_epoch(int64_t index, int64_t epoch, float* image_out, float* label_out) const override;
  std::string skipped_summary() const override { return skipped_->summary(description_); }
  bool decodes() const override { return true; }
  // Sample `index` decoded and resized as options say (HWC, RGB or gray), before any crop, flip
  // or mean: what cgdp mean averages. DataError names where it lies.
  Image decoded(int64_t index) const;
  // Where sample `index` lies, to begin its error messages (a path, a database key).
  virtual std::string where(int64_t index) const = 0;

 protected:
  // How to decode a stored image: the least size to decode it at, and the region needed (empty: all).
  struct DecodeRequest {
    int min_height = 0, min_width = 0;
    CropBox region;
  };
  // Given the stored image's height and width, what to decode of it.
  using DecodePlan = std::function<DecodeRequest(int height, int width)>;
  // Sample `index` (HWC, RGB or gray) into `out` (its buffer reused) and its label, decoded as
  // plan(its stored size) asks: a JPEG DCT-scaled and only over the region (decode_image),
  // other images whole.
  virtual void load(int64_t index, int& label, const DecodePlan& plan, Image& out) const = 0;

  const ImageOptions options_;

 private:
  void read_one(int64_t index, int64_t epoch, float* image_out, float* label_out) const;
  // Caffe's new_height/new_width: `out` or the resized copy it returns a reference to.
  const Image& load_resized(int64_t index, int& label, Image& out, Image& resized) const;
  void caffe_sample(int64_t index, int& label, const CounterRng& rng, float* image_out) const;
  void caffe_recipe(const Image& image, const CounterRng& rng, float* image_out) const;
  void torchvision_sample(int64_t index, int& label, const CounterRng& rng, float* image_out) const;

  std::string description_;
  std::unique_ptr<SkippedImages> skipped_ = std::make_unique<SkippedImages>();
};

class ImageDataset final : public ImageSourceDataset {
 public:
  ImageDataset(ImageList list, ImageOptions options, std::string description);

  int64_t size() const override { return static_cast<int64_t>(list_.entries.size()); }
  int num_classes() const override { return list_.num_classes; }
  const ImageList& list() const { return list_; }
  std::string where(int64_t index) const override { return list_.entries.at(index).path; }

 private:
  void load(int64_t index, int& label, const DecodePlan& plan, Image& out) const override;

  ImageList list_;
};

}  // namespace cgdp
