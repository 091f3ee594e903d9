// Reading one image sample: load (file or record, decoded DCT-scaled when it may) -> resize ->
// Caffe transform; and the files' loader.
#include "cgdp/data/image/image_dataset.hpp"

#include <algorithm>

#include "cgdp/core/counter_rng.hpp"
#include "cgdp/core/error.hpp"
#include "cgdp/io/file.hpp"

namespace cgdp {

std::pair<int, int> sample_size(const ImageOptions& o) {
  const int rrc = o.random_resized_crop.size;
  if (rrc > 0) return {rrc, rrc};
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
  // Image files decode to 1 or 3 channels (decode_image says so); raw LMDB records may hold more.
  if (options_.channels < 1)
    throw DataError(cat(description_, ": the model's input has ", options_.channels, " channels"));
  if (options_.random_resized_crop.size > 0 &&
      (options_.resize_height > 0 || options_.transform.crop_size > 0 || !options_.transform.mean_image.empty()))
    throw UsageError("the random resized crop sets the size itself: leave out --resize, --crop and --mean-file");
}

Shape ImageSourceDataset::sample_shape() const {
  const auto [h, w] = sample_size(options_);
  if (h <= 0 || w <= 0)
    throw DataError(cat(description_, ": no sample size (give the model's input, --resize or --crop)"));
  return {options_.channels, h, w};
}

Image ImageSourceDataset::decoded(int64_t index) const {
  try {
    int label = 0;
    Image image, resized;
    return load_resized(index, label, image, resized);
  } catch (const DataError& e) {
    throw DataError(cat(where(index), ": ", e.what()));
  }
}

const Image& ImageSourceDataset::load_resized(int64_t index, int& label, Image& out, Image& resized) const {
  const int rh = options_.resize_height, rw = options_.resize_width;
  load(index, label, [&](int, int) { return DecodeRequest{rh, rw, {}}; }, out);
  if (rh <= 0 || rw <= 0 || (out.height == rh && out.width == rw)) return out;
  resized = resize_bilinear(out, rh, rw);
  return resized;
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
  const CounterRng rng{options_.seed, hash_name("image-transform"), static_cast<uint64_t>(epoch),
                       static_cast<uint64_t>(index)};
  int label = 0;
  try {
    if (options_.random_resized_crop.size > 0)
      torchvision_sample(index, label, rng, image_out);
    else
      caffe_sample(index, label, rng, image_out);
  } catch (const DataError& e) {
    throw DataError(cat(where(index), ": ", e.what()));
  }
  *label_out = static_cast<float>(label);
}

namespace {
// Kept per loader thread: fresh pixel buffers would fault in page by page, image after image.
thread_local Image scratch, resized;
}  // namespace

void ImageSourceDataset::caffe_sample(int64_t index, int& label, const CounterRng& rng,
                                      float* image_out) const {
  const CaffeTransform& t = options_.transform;
  if (t.crop_size == 0 || options_.resize_height > 0)
    return caffe_recipe(load_resized(index, label, scratch, resized), rng, image_out);
  // The crop is drawn on the stored size, before decoding, so a JPEG decodes only the crop.
  CropDraw draw;
  bool drawn = false;
  const DecodePlan plan = [&](int height, int width) {
    if (height < t.crop_size || width < t.crop_size) return DecodeRequest{};  // refused below
    draw = draw_crop(t, height, width, options_.train, rng);
    drawn = true;
    return DecodeRequest{0, 0, {draw.top, draw.left, t.crop_size, t.crop_size}};
  };
  load(index, label, plan, scratch);
  if (!drawn) return caffe_recipe(scratch, rng, image_out);  // a raw record, or too small
  draw.top -= scratch.top;
  draw.left -= scratch.left;
  apply_caffe_transform(scratch, t, draw, image_out);
}

void ImageSourceDataset::caffe_recipe(const Image& image, const CounterRng& rng, float* image_out) const {
  const CaffeTransform& t = options_.transform;
  const auto [out_height, out_width] = sample_size(options_);
  if (t.crop_size == 0 && (image.height != out_height || image.width != out_width))
    throw DataError(cat("image of ", image.height, "x", image.width, " where the model takes ",
                        out_height, "x", out_width, " (give --resize ", out_height, "x", out_width,
                        " or --crop ", std::min(out_height, out_width), ")"));
  apply_caffe_transform(image, t, draw_crop(t, image.height, image.width, options_.train, rng),
                        image_out);
}

void ImageSourceDataset::torchvision_sample(int64_t index, int& label, const CounterRng& rng,
                                            float* image_out) const {
  const RandomResizedCrop& rrc = options_.random_resized_crop;
  // The box is drawn on the stored size, before decoding, so a JPEG decodes only the box, and
  // DCT-scaled as far as the box still covers the output.
  int full_height = 0, full_width = 0;
  CropBox box;
  const DecodePlan plan = [&](int height, int width) {
    full_height = height, full_width = width;
    box = options_.train ? draw_resized_crop(rrc, height, width, rng) : centre_crop_box(height, width);
    const auto [min_height, min_width] = least_decode_size(box, height, width, rrc.size);
    return DecodeRequest{min_height, min_width, box};
  };
  load(index, label, plan, scratch);
  if (full_height == 0) plan(scratch.height, scratch.width);  // a raw record
  apply_resized_crop(scratch, full_height, full_width, box,
                     options_.train && draw_flip(options_.transform.mirror, rng), rrc.size,
                     options_.transform, image_out);
}

ImageDataset::ImageDataset(ImageList list, ImageOptions options, std::string description)
    : ImageSourceDataset(std::move(options), std::move(description)), list_(std::move(list)) {}

void ImageDataset::load(int64_t index, int& label, const DecodePlan& plan, Image& out) const {
  const ImageEntry& entry = list_.entries.at(static_cast<size_t>(index));
  thread_local std::string file;
  read_file(entry.path, file);  // an IoError names the path itself
  label = entry.label;
  const std::span<const uint8_t> bytes{reinterpret_cast<const uint8_t*>(file.data()), file.size()};
  const auto [stored_height, stored_width] = image_size(bytes);
  const DecodeRequest request = plan(stored_height, stored_width);
  decode_image(bytes, options_.channels, request.min_height, request.min_width, out, request.region);
}

}  // namespace cgdp
