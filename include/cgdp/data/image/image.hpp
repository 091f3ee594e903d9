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

  uint8_t at(int y, int x, int c) const {
    return pixels[(static_cast<size_t>(y) * width + x) * channels + c];
  }
};

// Decodes a JPEG or PNG (told apart by their first bytes) to `channels` (1: gray, 3: RGB).
// A JPEG at least twice the size of `min_height` x `min_width` is decoded at the smallest
// DCT-domain scale (1/2, 1/4, 1/8) that stays at or above it: far less work than decoding it all.
// Throws DataError saying what is wrong with the bytes; the caller names the file.
Image decode_image(std::span<const uint8_t> bytes, int channels, int min_height = 0,
                   int min_width = 0);

// The header's size without decoding: {height, width}.
std::pair<int, int> image_size(std::span<const uint8_t> bytes);

// Encoders, for `cgdp convert`, tools and tests: baseline JPEG at `quality` (4:2:0), and PNG.
std::vector<uint8_t> encode_jpeg(const Image& image, int quality = 90);
std::vector<uint8_t> encode_png(const Image& image);

// Bilinear resize with OpenCV's INTER_LINEAR sampling (pixel centres aligned, no antialiasing),
// as Caffe's new_height/new_width resize; rounds to the nearest 8-bit value.
Image resize_bilinear(const Image& image, int height, int width);

}  // namespace cgdp
