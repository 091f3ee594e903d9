// Reading one image sample: file -> decode (DCT-scaled when it may) -> resize -> Caffe transform.
#include "cgdp/data/image/image_dataset.hpp"

#include <algorithm>
#include <fstream>
#include <tuple>
#include <iterator>
#include <vector>

#include "cgdp/core/error.hpp"

namespace cgdp {

namespace {

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError("cannot open the image file");
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw DataError("cannot read the image file");
  return bytes;
}

}  // namespace

std::pair<int, int> sample_size(const ImageOptions& o) {
  const int crop = o.transform.crop_size;
  return {crop > 0 ? crop : o.resize_height > 0 ? o.resize_height : o.height,
          crop > 0 ? crop : o.resize_width > 0 ? o.resize_width : o.width};
}

void transform_sample(Image image, const ImageOptions& options, int64_t index, int64_t epoch,
                      float* out) {
  const int rh = options.resize_height, rw = options.resize_width;
  if (rh > 0 && rw > 0) image = resize_bilinear(image, rh, rw);
  const CaffeTransform& t = options.transform;
  const auto [out_height, out_width] = sample_size(options);
  if (t.crop_size == 0 && (image.height != out_height || image.width != out_width))
    throw DataError(cat("image of ", image.height, "x", image.width, " where the model takes ",
                        out_height, "x", out_width, " (give --resize ", out_height, "x", out_width,
                        " or --crop ", std::min(out_height, out_width), ")"));
  const CounterRng rng{options.seed, hash_name("image-transform"), static_cast<uint64_t>(epoch),
                       static_cast<uint64_t>(index)};
  apply_caffe_transform(image, t, draw_crop(t, image.height, image.width, options.train, rng), out);
}

ImageDataset::ImageDataset(ImageList list, ImageOptions options, std::string description)
    : list_(std::move(list)), options_(std::move(options)), description_(std::move(description)) {
  std::tie(out_height_, out_width_) = sample_size(options_);
  if (options_.channels != 1 && options_.channels != 3)
    throw DataError(cat(description_, ": the model's input has ", options_.channels,
                        " channels; image data gives 1 (gray) or 3 (colour)"));
  if (out_height_ <= 0 || out_width_ <= 0)
    throw DataError(cat(description_, ": no sample size (give the model's input, --resize or --crop)"));
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

void ImageDataset::read_for_epoch(int64_t index, int64_t epoch, float* image_out, float* label_out) const {
  read_or_skip(index, size(), options_.skip_bad, *skipped_,
               [&](int64_t i) { read_one(i, epoch, image_out, label_out); });
}

void ImageDataset::read_one(int64_t index, int64_t epoch, float* image_out, float* label_out) const {
  const ImageEntry& entry = list_.entries.at(static_cast<size_t>(index));
  try {
    const std::vector<uint8_t> bytes = read_bytes(entry.path);
    transform_sample(decode_image(bytes, options_.channels, options_.resize_height, options_.resize_width),
                     options_, index, epoch, image_out);
  } catch (const DataError& e) {
    throw DataError(cat(entry.path, ": ", e.what()));
  }
  *label_out = static_cast<float>(entry.label);
}

}  // namespace cgdp
