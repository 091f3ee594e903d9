// Reading one image sample: load (file or record, decoded DCT-scaled when it may) -> resize ->
// Caffe transform; and the files' loader.
#include "cgdp/data/image/image_dataset.hpp"

#include <algorithm>

#include "cgdp/core/counter_rng.hpp"
#include "cgdp/core/error.hpp"
#include "cgdp/io/file.hpp"

namespace cgdp {

std::pair<int, int> sample_size(const ImageOptions& o) {
  const int crop = o.transform.crop_size;
  return {crop > 0 ? crop : o.resize_height > 0 ? o.resize_height : o.height,
          crop > 0 ? crop : o.resize_width > 0 ? o.resize_width : o.width};
}

void SkippedImages::note(const std::string& why) {
  std::lock_guard lock(mutex_);
  if (count_++ == 0) first_ = why;
}

std::string SkippedImages::summary(const std::string& source) const {
  std::lock_guard lock(mutex_);
  if (count_ == 0) return "";
  return cat(source, ": --skip-bad-images replaced ", count_, " read", count_ > 1 ? "s" : "",
             " of unreadable images by the next sample (first: ", first_, ")");
}

ImageSourceDataset::ImageSourceDataset(ImageOptions options, std::string description)
    : options_(std::move(options)), description_(std::move(description)) {
  if (options_.channels != 1 && options_.channels != 3)
    throw DataError(cat(description_, ": the model's input has ", options_.channels,
                        " channels; image data gives 1 (gray) or 3 (colour)"));
  const auto [h, w] = sample_size(options_);
  if (h <= 0 || w <= 0)
    throw DataError(cat(description_, ": no sample size (give the model's input, --resize or --crop)"));
}

Shape ImageSourceDataset::sample_shape() const {
  const auto [h, w] = sample_size(options_);
  return {options_.channels, h, w};
}

void ImageSourceDataset::read_for_epoch(int64_t index, int64_t epoch, float* image_out,
                                        float* label_out) const {
  for (int64_t tries = 0;; ++tries) {
    try {
      read_one((index + tries) % size(), epoch, image_out, label_out);
      return;
    } catch (const Error& e) {
      const bool unreadable = dynamic_cast<const DataError*>(&e) || dynamic_cast<const IoError*>(&e);
      if (!unreadable || !options_.skip_bad || tries + 1 >= size()) throw;
      skipped_->note(e.what());
    }
  }
}

void ImageSourceDataset::read_one(int64_t index, int64_t epoch, float* image_out, float* label_out) const {
  int label = 0;
  try {
    Image image = load(index, label);
    const int rh = options_.resize_height, rw = options_.resize_width;
    if (rh > 0 && rw > 0) image = resize_bilinear(image, rh, rw);
    const CaffeTransform& t = options_.transform;
    const auto [out_height, out_width] = sample_size(options_);
    if (t.crop_size == 0 && (image.height != out_height || image.width != out_width))
      throw DataError(cat("image of ", image.height, "x", image.width, " where the model takes ",
                          out_height, "x", out_width, " (give --resize ", out_height, "x", out_width,
                          " or --crop ", std::min(out_height, out_width), ")"));
    const CounterRng rng{options_.seed, hash_name("image-transform"), static_cast<uint64_t>(epoch),
                         static_cast<uint64_t>(index)};
    apply_caffe_transform(image, t, draw_crop(t, image.height, image.width, options_.train, rng),
                          image_out);
  } catch (const DataError& e) {
    throw DataError(cat(where(index), ": ", e.what()));
  }
  *label_out = static_cast<float>(label);
}

ImageDataset::ImageDataset(ImageList list, ImageOptions options, std::string description)
    : ImageSourceDataset(std::move(options), std::move(description)), list_(std::move(list)) {}

Image ImageDataset::load(int64_t index, int& label) const {
  const ImageEntry& entry = list_.entries.at(static_cast<size_t>(index));
  const std::string bytes = read_file(entry.path);  // an IoError names the path itself
  label = entry.label;
  return decode_image({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()},
                      options_.channels, options_.resize_height, options_.resize_width);
}

}  // namespace cgdp
