// PNG through libpng's simplified API (png_image), which handles every bit depth and palette.
#include <png.h>

#include <cstring>

#include "cgdp/core/error.hpp"
#include "cgdp/data/image/image.hpp"
#include "data/image/codecs.hpp"

namespace cgdp {

namespace {

// Frees what libpng holds on every path out.
struct PngImage {
  png_image image;
  PngImage() {
    std::memset(&image, 0, sizeof image);
    image.version = PNG_IMAGE_VERSION;
  }
  ~PngImage() { png_image_free(&image); }
};

void begin_read(PngImage& png, std::span<const uint8_t> bytes) {
  if (!png_image_begin_read_from_memory(&png.image, bytes.data(), bytes.size()))
    throw DataError(cat("not a readable PNG: ", png.image.message));
  check_declared_pixels(png.image.height, png.image.width, "PNG");
}

}  // namespace

bool is_png(std::span<const uint8_t> bytes) {
  static const uint8_t kMagic[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  return bytes.size() >= 8 && std::memcmp(bytes.data(), kMagic, 8) == 0;
}

std::pair<int, int> png_size(std::span<const uint8_t> bytes) {
  PngImage png;
  begin_read(png, bytes);
  return {static_cast<int>(png.image.height), static_cast<int>(png.image.width)};
}

int png_channels(std::span<const uint8_t> bytes) {
  PngImage png;
  begin_read(png, bytes);
  return (png.image.format & PNG_FORMAT_FLAG_COLOR) ? 3 : 1;
}

void decode_png(std::span<const uint8_t> bytes, int channels, Image& image) {
  PngImage png;
  begin_read(png, bytes);
  png.image.format = channels == 1 ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
  image.height = static_cast<int>(png.image.height);
  image.width = static_cast<int>(png.image.width);
  image.channels = channels;
  image.pixels.resize(PNG_IMAGE_SIZE(png.image));
  if (!png_image_finish_read(&png.image, nullptr, image.pixels.data(), 0, nullptr))
    throw DataError(cat("PNG decoding failed: ", png.image.message));
}

std::vector<uint8_t> encode_png(const Image& image) {
  PngImage png;
  png.image.width = static_cast<png_uint_32>(image.width);
  png.image.height = static_cast<png_uint_32>(image.height);
  png.image.format = image.channels == 1 ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
  png_alloc_size_t size = 0;
  if (!png_image_write_get_memory_size(png.image, size, 0, image.pixels.data(), 0, nullptr))
    throw Error(cat("PNG encoding failed: ", png.image.message));
  std::vector<uint8_t> bytes(size);
  if (!png_image_write_to_memory(&png.image, bytes.data(), &size, 0, image.pixels.data(), 0, nullptr))
    throw Error(cat("PNG encoding failed: ", png.image.message));
  bytes.resize(size);
  return bytes;
}

}  // namespace cgdp
