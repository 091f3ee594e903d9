// A decoded image: 8-bit pixels, rows top to bottom, channels interleaved (gray, or R G B).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace cgdp {

struct Image {
  int height = 0, width = 0, channels = 0;
  std::vector<uint8_t> pixels;  // height * width * channels
  // A decode may be DCT-scaled and cover only a region: these pixels then sit at (top, left) of a
  // whole_height x whole_width picture (the stored image at the decode's scale). 0: all of it.
  int top = 0, left = 0;
  int whole_height = 0, whole_width = 0;
  int picture_height() const { return whole_height > 0 ? whole_height : height; }
  int picture_width() const { return whole_width > 0 ? whole_width : width; }

  uint8_t at(int y, int x, int c) const {
    return pixels[(static_cast<size_t>(y) * width + x) * channels + c];
  }
};

// A region of an image, in its own pixels; empty (0 x 0) stands for all of it.
struct CropBox {
  int top = 0, left = 0, height = 0, width = 0;
  bool operator==(const CropBox&) const = default;
};

// Decodes a JPEG or PNG (told apart by their first bytes) to `channels` (1: gray, 3: RGB).
// A JPEG at least twice the size of `min_height` x `min_width` is decoded at the smallest
// DCT-domain scale (1/2, 1/4, 1/8) that stays at or above it: far less work than decoding it all.
// Throws DataError saying what is wrong with the bytes; the caller names the file.
Image decode_image(std::span<const uint8_t> bytes, int channels, int min_height = 0,
                   int min_width = 0);
// The same into `out`, whose pixel buffer is reused: a loader thread decodes image after image.
// A JPEG is decoded only over `region` (of the stored image, plus a pixel's margin, the left edge
// moved to a DCT block's): `out`'s top/left/whole_* say where it lies. Other images decode whole.
// A region's decode stops after its last row, so damage further down the file goes unnoticed;
// a whole decode reads to the end marker and reports it.
void decode_image(std::span<const uint8_t> bytes, int channels, int min_height, int min_width,
                  Image& out, const CropBox& region = {});

// The header's size without decoding: {height, width}.
std::pair<int, int> image_size(std::span<const uint8_t> bytes);
// The header's channel count as OpenCV's IMREAD_ANYCOLOR would decode it: 1 (gray) or 3.
int image_channels(std::span<const uint8_t> bytes);

// Encoders, for `cgdp convert`, tools and tests: baseline JPEG at `quality` (4:2:0), and PNG.
std::vector<uint8_t> encode_jpeg(const Image& image, int quality = 90);
std::vector<uint8_t> encode_png(const Image& image);

// The most pixels an image may have (16384 x 16384), decoded or resized to: a few hundred bytes
// can declare 65535 x 65535, whose decode would take 12 GiB and minutes (a decompression bomb).
inline constexpr int64_t kMaxImagePixels = int64_t{1} << 28;
// "", or why `height` x `width` is no size for an image (not positive, or over kMaxImagePixels).
std::string image_size_problem(int64_t height, int64_t width);

// Bilinear resize with OpenCV's INTER_LINEAR sampling (pixel centres aligned, no antialiasing),
// as Caffe's new_height/new_width resize; rounds to the nearest 8-bit value.
// DataError for a size image_size_problem() refuses.
Image resize_bilinear(const Image& image, int height, int width);

}  // namespace cgdp
