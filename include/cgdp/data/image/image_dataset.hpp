// A Dataset of image files (a folder tree or a list file), decoded and transformed as it is read.
#pragma once

#include <string>

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
  bool train = true;           // random crops and mirrors; the test split takes the centre
  uint64_t seed = 1;
};

// The sample shape `options` give: the crop, else the resize, else the model's input.
std::pair<int, int> sample_size(const ImageOptions& options);

// Resizes (when asked), checks the size and applies the transform with the draw of (seed, epoch,
// index): the part every image source shares. `image` is as decoded (HWC, RGB or gray).
void transform_sample(Image image, const ImageOptions& options, int64_t index, int64_t epoch,
                      float* out);

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

  const ImageList& list() const { return list_; }

 private:
  ImageList list_;
  ImageOptions options_;
  std::string description_;
  int out_height_ = 0, out_width_ = 0;
};

}  // namespace cgdp
