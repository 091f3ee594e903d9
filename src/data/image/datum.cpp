// Datum records: parsed from an LMDB value, decoded to an image, and written from one.
#include "cgdp/data/image/datum.hpp"

#include <span>

#include "cgdp/core/error.hpp"

namespace cgdp {

namespace {

std::span<const uint8_t> bytes_of(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

// A raw Datum's C x H x W, which must be positive and count its bytes. C x H cannot overflow 64
// bits (two int32s), but x W can: a record may declare any sizes.
void check_raw_sizes(const proto::Datum& d) {
  const int64_t C = d.channels(), H = d.height(), W = d.width();
  int64_t count = 0;
  if (C <= 0 || H <= 0 || W <= 0 || __builtin_mul_overflow(C * H, W, &count) ||
      count != static_cast<int64_t>(d.data().size()))
    throw DataError(cat("raw Datum of ", C, "x", H, "x", W, " holds ", d.data().size(),
                        " bytes (float_data is not read)"));
}

}  // namespace

proto::Datum parse_datum(const std::string& value) {
  proto::Datum d;
  if (!d.ParseFromString(value) || (!d.has_data() && d.float_data_size() == 0))
    throw DataError("not a Caffe Datum record (is this a Caffe LMDB?)");
  return d;
}

DatumShape datum_shape(const proto::Datum& d) {
  if (!d.encoded()) {
    check_raw_sizes(d);
    return {d.channels(), d.height(), d.width()};
  }
  const auto [height, width] = image_size(bytes_of(d.data()));
  return {image_channels(bytes_of(d.data())), height, width};
}

Image datum_image(const proto::Datum& d, int channels, int min_height, int min_width) {
  Image image;
  datum_image(d, channels, min_height, min_width, image);
  return image;
}

void datum_image(const proto::Datum& d, int channels, int min_height, int min_width, Image& image) {
  const std::string& bytes = d.data();
  if (d.encoded()) return decode_image(bytes_of(bytes), channels, min_height, min_width, image);
  check_raw_sizes(d);
  const int64_t C = d.channels(), H = d.height(), W = d.width();
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
        px[0] =
            static_cast<uint8_t>((299 * plane(2) + 587 * plane(1) + 114 * plane(0) + 500) / 1000);
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

}  // namespace cgdp
