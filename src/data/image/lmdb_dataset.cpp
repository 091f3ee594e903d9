// Datum records to samples; the class count is read from every record's label at open.
#include "cgdp/data/image/lmdb_dataset.hpp"

#include <algorithm>

#include "cgdp/core/error.hpp"

namespace cgdp {

Image datum_image(const proto::Datum& d, int channels, int min_height, int min_width) {
  const std::string& bytes = d.data();
  if (d.encoded())
    return decode_image({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}, channels,
                        min_height, min_width);
  const int64_t C = d.channels(), H = d.height(), W = d.width();
  if (C <= 0 || H <= 0 || W <= 0 || C * H * W != static_cast<int64_t>(bytes.size()))
    throw DataError(cat("raw Datum of ", C, "x", H, "x", W, " holds ", bytes.size(),
                        " bytes (float_data is not read)"));
  if (C != 1 && C != 3) throw DataError(cat("raw Datum of ", C, " channels; expected 1 or 3"));
  Image image{static_cast<int>(H), static_cast<int>(W), channels,
              std::vector<uint8_t>(static_cast<size_t>(H * W * channels))};
  for (int64_t y = 0; y < H; ++y)
    for (int64_t x = 0; x < W; ++x) {
      auto plane = [&](int64_t c) { return static_cast<uint8_t>(bytes[(c * H + y) * W + x]); };
      uint8_t* px = &image.pixels[(y * W + x) * channels];
      if (C == 1) {
        for (int c = 0; c < channels; ++c) px[c] = plane(0);
      } else if (channels == 3) {
        px[0] = plane(2), px[1] = plane(1), px[2] = plane(0);  // BGR planes to RGB
      } else {  // ITU-R 601 luma, as libpng's and libjpeg's gray conversions
        px[0] = static_cast<uint8_t>((299 * plane(2) + 587 * plane(1) + 114 * plane(0) + 500) / 1000);
      }
    }
  return image;
}

proto::Datum raw_datum(const Image& image, int label) {
  proto::Datum d;
  d.set_channels(image.channels);
  d.set_height(image.height);
  d.set_width(image.width);
  d.set_label(label);
  std::string& bytes = *d.mutable_data();
  bytes.resize(image.pixels.size());
  for (int c = 0; c < image.channels; ++c) {
    const int source = image.channels == 3 ? 2 - c : c;  // RGB to BGR planes
    for (int y = 0; y < image.height; ++y)
      for (int x = 0; x < image.width; ++x)
        bytes[(static_cast<size_t>(c) * image.height + y) * image.width + x] =
            static_cast<char>(image.at(y, x, source));
  }
  return d;
}

LmdbDataset::LmdbDataset(const std::string& path, ImageOptions options, std::string description)
    : db_(path), options_(std::move(options)), description_(std::move(description)) {
  // Labels are checked as records are read: scanning a million records here would read them all.
  num_classes_ = options_.classes;
  if (num_classes_ <= 0) throw DataError(cat(path, ": no class count for the labels (the model gives it)"));
  (void)datum(0);  // a database that is not Caffe's fails now, not at the first batch
}

Shape LmdbDataset::sample_shape() const {
  const auto [h, w] = sample_size(options_);
  return {options_.channels, h, w};
}

proto::Datum LmdbDataset::datum(int64_t index) const {
  proto::Datum d;
  const std::string value = db_.value(static_cast<size_t>(index));
  if (!d.ParseFromString(value) || (!d.has_data() && d.float_data_size() == 0))
    throw DataError(cat(db_.path(), ": key '", db_.keys()[index],
                        "': not a Caffe Datum record (is this a Caffe LMDB?)"));
  return d;
}

void LmdbDataset::read_for_epoch(int64_t index, int64_t epoch, float* image_out, float* label_out) const {
  read_or_skip(index, size(), options_.skip_bad, *skipped_,
               [&](int64_t i) { read_one(i, epoch, image_out, label_out); });
}

void LmdbDataset::read_one(int64_t index, int64_t epoch, float* image_out, float* label_out) const {
  const proto::Datum d = datum(index);
  try {
    transform_sample(datum_image(d, options_.channels, options_.resize_height, options_.resize_width),
                     options_, index, epoch, image_out);
  } catch (const DataError& e) {
    throw DataError(cat(db_.path(), ": key '", db_.keys()[index], "': ", e.what()));
  }
  if (d.label() < 0 || d.label() >= num_classes_)
    throw DataError(cat(db_.path(), ": key '", db_.keys()[index], "': label ", d.label(),
                        " is outside the model's ", num_classes_, " classes"));
  *label_out = static_cast<float>(d.label());
}

}  // namespace cgdp
