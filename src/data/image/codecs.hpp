// The format halves behind decode_image (image.hpp): one file per library.
#pragma once

#include <cstdint>
#include <span>
#include <utility>

#include "cgdp/data/image/image.hpp"

namespace cgdp {

// DataError when `format`'s header declares more than kMaxImagePixels.
void check_declared_pixels(int64_t height, int64_t width, const char* format);

bool is_jpeg(std::span<const uint8_t> bytes);
std::pair<int, int> jpeg_size(std::span<const uint8_t> bytes);
int jpeg_channels(std::span<const uint8_t> bytes);  // 1 for gray, else 3
// `region` (stored pixels; empty: all) is decoded, DCT-scaled, with a margin; see Image::top.
void decode_jpeg(std::span<const uint8_t> bytes, int channels, int min_height, int min_width,
                 const CropBox& region, Image& out);

bool is_png(std::span<const uint8_t> bytes);
std::pair<int, int> png_size(std::span<const uint8_t> bytes);
int png_channels(std::span<const uint8_t> bytes);  // 1 for gray (with or without alpha), else 3
void decode_png(std::span<const uint8_t> bytes, int channels, Image& out);

}  // namespace cgdp
