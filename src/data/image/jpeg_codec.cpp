// JPEG through libjpeg-turbo's TurboJPEG API, with DCT-domain downscaling.
#include <turbojpeg.h>

#include <memory>

#include "cgdp/core/error.hpp"
#include "cgdp/data/image/image.hpp"
#include "data/image/codecs.hpp"

namespace cgdp {

namespace {

struct TjFree {
  void operator()(void* handle) const { tjDestroy(handle); }
};
using TjHandle = std::unique_ptr<void, TjFree>;

// One decoder per thread, kept: a handle is not thread-safe, and making one per image costs time.
void* decompressor() {
  thread_local TjHandle h(tjInitDecompress());
  if (!h) throw DataError(cat("cannot start a JPEG decoder: ", tjGetErrorStr2(nullptr)));
  return h.get();
}

struct Header {
  int width = 0, height = 0, subsampling = 0, colorspace = 0;
};

Header read_header(void* handle, std::span<const uint8_t> bytes) {
  Header h;
  if (tjDecompressHeader3(handle, bytes.data(), bytes.size(), &h.width, &h.height, &h.subsampling,
                          &h.colorspace) != 0)
    throw DataError(cat("not a readable JPEG: ", tjGetErrorStr2(handle)));
  return h;
}

// The smallest scale num/denom <= 1 of 1/2, 1/4, 1/8 keeping both sides at least the minimum.
tjscalingfactor dct_scale(const Header& h, int min_height, int min_width) {
  tjscalingfactor best{1, 1};
  for (int denom : {2, 4, 8}) {
    const tjscalingfactor f{1, denom};
    if (min_height <= 0 || min_width <= 0) break;
    if (TJSCALED(h.width, f) >= min_width && TJSCALED(h.height, f) >= min_height) best = f;
  }
  return best;
}

}  // namespace

bool is_jpeg(std::span<const uint8_t> bytes) {
  return bytes.size() >= 3 && bytes[0] == 0xFF && bytes[1] == 0xD8 && bytes[2] == 0xFF;
}

std::pair<int, int> jpeg_size(std::span<const uint8_t> bytes) {
  const Header h = read_header(decompressor(), bytes);
  return {h.height, h.width};
}

Image decode_jpeg(std::span<const uint8_t> bytes, int channels, int min_height, int min_width) {
  void* handle = decompressor();
  const Header h = read_header(handle, bytes);
  const tjscalingfactor scale = dct_scale(h, min_height, min_width);
  Image image;
  image.width = TJSCALED(h.width, scale);
  image.height = TJSCALED(h.height, scale);
  image.channels = channels;
  image.pixels.resize(static_cast<size_t>(image.width) * image.height * channels);
  // TJFLAG_STOPONWARNING: a truncated or damaged file is an error, not a grey bottom half.
  if (tjDecompress2(handle, bytes.data(), bytes.size(), image.pixels.data(), image.width, 0,
                    image.height, channels == 1 ? TJPF_GRAY : TJPF_RGB,
                    TJFLAG_STOPONWARNING) != 0)
    throw DataError(cat("JPEG decoding failed: ", tjGetErrorStr2(handle)));
  return image;
}

std::vector<uint8_t> encode_jpeg(const Image& image, int quality) {
  TjHandle handle(tjInitCompress());
  if (!handle) throw Error(cat("cannot start a JPEG encoder: ", tjGetErrorStr2(nullptr)));
  unsigned char* out = nullptr;
  unsigned long size = 0;
  const bool gray = image.channels == 1;
  if (tjCompress2(handle.get(), image.pixels.data(), image.width, 0, image.height,
                  gray ? TJPF_GRAY : TJPF_RGB, &out, &size, gray ? TJSAMP_GRAY : TJSAMP_420,
                  quality, 0) != 0) {
    tjFree(out);
    throw Error(cat("JPEG encoding failed: ", tjGetErrorStr2(handle.get())));
  }
  std::vector<uint8_t> bytes(out, out + size);
  tjFree(out);
  return bytes;
}

}  // namespace cgdp
