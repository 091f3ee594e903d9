// Datum records to samples; the class count is read from every record's label at open.
#include "cgdp/data/image/lmdb_dataset.hpp"

#include <algorithm>

#include "cgdp/core/error.hpp"

namespace cgdp {

Image datum_image(const proto::Datum& d, int channels, int min_height, int min_width) {
  Image image;
  datum_image(d, channels, min_height, min_width, image);
  return image;
}

void datum_image(const proto::Datum& d, int channels, int min_height, int min_width, Image& image) {
  const std::string& bytes = d.data();
  if (d.encoded())
    return decode_image({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}, channels,
                        min_height, min_width, image);
  const int64_t C = d.channels(), H = d.height(), W = d.width();
  if (C <= 0 || H <= 0 || W <= 0 || C * H * W != static_cast<int64_t>(bytes.size()))
    throw DataError(cat("raw Datum of ", C, "x", H, "x", W, " holds ", bytes.size(),
                        " bytes (float_data is not read)"));
  // Other channel counts (the Siamese example's pairs of gray digits) are planes kept in order.
  const bool planes_in_order = C != 1 && C != 3;
  if ((planes_in_order || (channels != 1 && channels != 3)) && channels != C)
    throw DataError(cat("raw Datum of ", C, " channels, but the model takes ", channels));
  image.height = static_cast<int>(H);
  image.width = static_cast<int>(W);
  image.channels = channels;
  image.top = image.left = image.whole_height = image.whole_width = 0;
  image.pixels.resize(static_cast<size_t>(H * W * channels));
  for (int64_t y = 0; y < H; ++y)
    for (int64_t x = 0; x < W; ++x) {
      auto plane = [&](int64_t c) { return static_cast<uint8_t>(bytes[(c * H + y) * W + x]); };
      uint8_t* px = &image.pixels[(y * W + x) * channels];
      if (planes_in_order) {
        for (int c = 0; c < channels; ++c) px[c] = plane(c);
      } else if (C == 1) {
        for (int c = 0; c < channels; ++c) px[c] = plane(0);
      } else if (channels == 3) {
        px[0] = plane(2), px[1] = plane(1), px[2] = plane(0);  // BGR planes to RGB
      } else {  // ITU-R 601 luma, as libpng's and libjpeg's gray conversions
        px[0] = static_cast<uint8_t>((299 * plane(2) + 587 * plane(1) + 114 * plane(0) + 500) / 1000);
      }
    }
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
    : ImageSourceDataset(std::move(options), std::move(description)), db_(path) {
  if (options_.classes <= 0)
    throw DataError(cat(path, ": no class count for the labels (the model gives it)"));
  try {
    (void)datum(0);  // a database that is not Caffe's fails now, not at the first batch
  } catch (const DataError& e) {
    throw DataError(cat(where(0), ": ", e.what()));
  }
}

proto::Datum LmdbDataset::datum(int64_t index) const {
  proto::Datum d;
  if (!d.ParseFromString(db_.value(static_cast<size_t>(index))) ||
      (!d.has_data() && d.float_data_size() == 0))
    throw DataError("not a Caffe Datum record (is this a Caffe LMDB?)");
  return d;
}

void LmdbDataset::load(int64_t index, int& label, const DecodePlan& plan, Image& out) const {
  const proto::Datum d = datum(index);
  if (d.label() < 0 || d.label() >= options_.classes)
    throw DataError(cat("label ", d.label(), " is outside the model's ", options_.classes, " classes"));
  label = d.label();
  if (!d.encoded()) return datum_image(d, options_.channels, 0, 0, out);
  const std::string& data = d.data();  // Caffe leaves an encoded Datum's sizes unset: read the header
  const auto [stored_height, stored_width] =
      image_size({reinterpret_cast<const uint8_t*>(data.data()), data.size()});
  const DecodeRequest request = plan(stored_height, stored_width);
  decode_image({reinterpret_cast<const uint8_t*>(data.data()), data.size()}, options_.channels,
               request.min_height, request.min_width, out, request.region);
}

}  // namespace cgdp
