// Reading one image sample: file -> decode (DCT-scaled when it may) -> resize -> Caffe transform.
#include "cgdp/data/image/image_dataset.hpp"

#include <fstream>
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

ImageDataset::ImageDataset(ImageList list, ImageOptions options, std::string description)
    : list_(std::move(list)), options_(std::move(options)), description_(std::move(description)) {
  const CaffeTransform& t = options_.transform;
  out_height_ = t.crop_size > 0 ? t.crop_size : options_.resize_height > 0 ? options_.resize_height : options_.height;
  out_width_ = t.crop_size > 0 ? t.crop_size : options_.resize_width > 0 ? options_.resize_width : options_.width;
  if (options_.channels != 1 && options_.channels != 3)
    throw DataError(cat(description_, ": the model's input has ", options_.channels,
                        " channels; image data gives 1 (gray) or 3 (colour)"));
  if (out_height_ <= 0 || out_width_ <= 0)
    throw DataError(cat(description_, ": no sample size (give the model's input, --resize or --crop)"));
}

void ImageDataset::read_for_epoch(int64_t index, int64_t epoch, float* image_out, float* label_out) const {
  const ImageEntry& entry = list_.entries.at(static_cast<size_t>(index));
  try {
    const std::vector<uint8_t> bytes = read_bytes(entry.path);
    const int rh = options_.resize_height, rw = options_.resize_width;
    Image image = decode_image(bytes, options_.channels, rh, rw);
    if (rh > 0 && rw > 0) image = resize_bilinear(image, rh, rw);
    const CaffeTransform& t = options_.transform;
    if (t.crop_size == 0 && (image.height != out_height_ || image.width != out_width_))
      throw DataError(cat("image of ", image.height, "x", image.width, " where the model takes ",
                          out_height_, "x", out_width_, " (give --resize ", out_height_, "x",
                          out_width_, " or --crop ", std::min(out_height_, out_width_), ")"));
    const CounterRng rng{options_.seed, hash_name("image-transform"), static_cast<uint64_t>(epoch),
                         static_cast<uint64_t>(index)};
    const CropDraw draw = draw_crop(t, image.height, image.width, options_.train, rng);
    apply_caffe_transform(image, t, draw, image_out);
  } catch (const DataError& e) {
    throw DataError(cat(entry.path, ": ", e.what()));
  }
  *label_out = static_cast<float>(entry.label);
}

}  // namespace cgdp
