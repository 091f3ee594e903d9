// Format dispatch by magic bytes, and the bilinear resize Caffe's new_height/new_width uses.
#include <algorithm>
#include <cmath>

#include "cgdp/core/error.hpp"
#include "cgdp/data/image/image.hpp"
#include "data/image/codecs.hpp"

namespace cgdp {

namespace {

void check_channels(int channels) {
  if (channels != 1 && channels != 3)
    throw DataError(cat("images decode to 1 (gray) or 3 (RGB) channels, not ", channels));
}

}  // namespace

std::string image_size_problem(int64_t height, int64_t width) {
  if (height <= 0 || width <= 0) return cat(height, " x ", width, ": not a size");
  if (height > kMaxImagePixels / width)
    return cat(height, " x ", width, " is ", height * width, " pixels, more than the ",
               kMaxImagePixels, " (16384 x 16384) of the largest image cgdp makes");
  return "";
}

void check_declared_pixels(int64_t height, int64_t width, const char* format) {
  if (height * width > kMaxImagePixels)
    throw DataError(cat(format, " declares ", width, " x ", height, " pixels, more than the ",
                        kMaxImagePixels, " cgdp decodes (cut or shrink it first)"));
}

Image decode_image(std::span<const uint8_t> bytes, int channels, int min_height, int min_width) {
  Image image;
  decode_image(bytes, channels, min_height, min_width, image);
  return image;
}

void decode_image(std::span<const uint8_t> bytes, int channels, int min_height, int min_width,
                  Image& out, const CropBox& region) {
  check_channels(channels);
  if (is_jpeg(bytes)) return decode_jpeg(bytes, channels, min_height, min_width, region, out);
  out.top = out.left = out.whole_height = out.whole_width = 0;
  if (is_png(bytes)) return decode_png(bytes, channels, out);
  throw DataError(bytes.empty() ? std::string("empty file; expected a JPEG or PNG image")
                                : "neither JPEG nor PNG (by its first bytes)");
}

std::pair<int, int> image_size(std::span<const uint8_t> bytes) {
  if (is_jpeg(bytes)) return jpeg_size(bytes);
  if (is_png(bytes)) return png_size(bytes);
  throw DataError("neither JPEG nor PNG (by its first bytes)");
}

int image_channels(std::span<const uint8_t> bytes) {
  if (is_jpeg(bytes)) return jpeg_channels(bytes);
  if (is_png(bytes)) return png_channels(bytes);
  throw DataError("neither JPEG nor PNG (by its first bytes)");
}

Image resize_bilinear(const Image& src, int height, int width) {
  if (height == src.height && width == src.width) return src;
  if (const std::string problem = image_size_problem(height, width); !problem.empty())
    throw DataError(cat("cannot resize an image to ", problem));
  Image dst;
  dst.height = height;
  dst.width = width;
  dst.channels = src.channels;
  dst.pixels.resize(static_cast<size_t>(height) * width * src.channels);
  const double sy = static_cast<double>(src.height) / height;
  const double sx = static_cast<double>(src.width) / width;
  // OpenCV INTER_LINEAR: sample at ((d + 0.5) * scale - 0.5), clamped to the edge pixels.
  auto taps = [](double pos, int size, int& i0, int& i1, double& frac) {
    pos = std::max(pos, 0.0);
    i0 = std::min(static_cast<int>(pos), size - 1);
    i1 = std::min(i0 + 1, size - 1);
    frac = std::min(pos - i0, 1.0);
  };
  for (int y = 0; y < height; ++y) {
    int y0, y1;
    double fy;
    taps((y + 0.5) * sy - 0.5, src.height, y0, y1, fy);
    for (int x = 0; x < width; ++x) {
      int x0, x1;
      double fx;
      taps((x + 0.5) * sx - 0.5, src.width, x0, x1, fx);
      for (int c = 0; c < src.channels; ++c) {
        const double top = src.at(y0, x0, c) * (1 - fx) + src.at(y0, x1, c) * fx;
        const double bottom = src.at(y1, x0, c) * (1 - fx) + src.at(y1, x1, c) * fx;
        const double v = top * (1 - fy) + bottom * fy;
        dst.pixels[(static_cast<size_t>(y) * width + x) * src.channels + c] =
            static_cast<uint8_t>(std::clamp(std::lround(v), 0L, 255L));
      }
    }
  }
  return dst;
}

}  // namespace cgdp
