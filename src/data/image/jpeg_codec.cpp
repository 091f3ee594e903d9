// JPEG through libjpeg-turbo: headers and encoding by its TurboJPEG API; decoding by its libjpeg
// API, which can scale in the DCT domain and decode only the rows and columns a crop needs.
#include <turbojpeg.h>

// jpeglib.h needs FILE and size_t declared first.
#include <cstdio>
#include <csetjmp>
#include <jpeglib.h>

#include <algorithm>
#include <cmath>

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
  check_declared_pixels(h.height, h.width, "JPEG");
  return h;
}

// CMYK (or YCCK) as RGB, as OpenCV converts it for Caffe: channel = k - (255 - ink) * k / 256.
// Adobe's CMYK JPEGs (most of ImageNet's) store inverted inks, which this reads as intended.
void cmyk_to_rgb(const uint8_t* cmyk, int width, int channels, uint8_t* out) {
  for (int x = 0; x < width; ++x, cmyk += 4) {
    const int k = cmyk[3];
    uint8_t rgb[3];
    for (int c = 0; c < 3; ++c) rgb[c] = static_cast<uint8_t>(k - ((255 - cmyk[c]) * k >> 8));
    if (channels == 1)  // ITU-R BT.601 luma, as libjpeg's RGB-to-gray
      *out++ =
          static_cast<uint8_t>((rgb[0] * 19595 + rgb[1] * 38470 + rgb[2] * 7471 + 32768) >> 16);
    else
      for (int c = 0; c < 3; ++c) *out++ = rgb[c];
  }
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

// libjpeg reports errors through error_exit, which must not return: it jumps back to the decoder,
// which throws. Warnings (corrupt or missing data) are errors here, as TJFLAG_STOPONWARNING.
struct JpegError {
  jpeg_error_mgr manager;
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX] = "";
};

void jump_on_error(j_common_ptr info) {
  auto* error = reinterpret_cast<JpegError*>(info->err);
  (*info->err->format_message)(info, error->message);
  std::longjmp(error->jump, 1);
}

void jump_on_warning(j_common_ptr info, int level) {
  if (level < 0) jump_on_error(info);
}

// The libjpeg decompressor with the error handling above; released however the decode ends.
struct JpegDecoder {
  jpeg_decompress_struct info{};
  JpegError error;
  JpegDecoder() {
    info.err = jpeg_std_error(&error.manager);
    error.manager.error_exit = jump_on_error;
    error.manager.emit_message = jump_on_warning;
    jpeg_create_decompress(&info);
  }
  ~JpegDecoder() { jpeg_destroy_decompress(&info); }
  JpegDecoder(const JpegDecoder&) = delete;
  JpegDecoder& operator=(const JpegDecoder&) = delete;
};

}  // namespace

bool is_jpeg(std::span<const uint8_t> bytes) {
  return bytes.size() >= 3 && bytes[0] == 0xFF && bytes[1] == 0xD8 && bytes[2] == 0xFF;
}

std::pair<int, int> jpeg_size(std::span<const uint8_t> bytes) {
  const Header h = read_header(decompressor(), bytes);
  return {h.height, h.width};
}

int jpeg_channels(std::span<const uint8_t> bytes) {
  return read_header(decompressor(), bytes).colorspace == TJCS_GRAY ? 1 : 3;
}

void decode_jpeg(std::span<const uint8_t> bytes, int channels, int min_height, int min_width,
                 const CropBox& region, Image& image) {
  const Header h = read_header(decompressor(), bytes);
  const int denom = dct_scale(h, min_height, min_width).denom;
  JpegDecoder d;
  if (setjmp(d.error.jump)) throw DataError(cat("JPEG decoding failed: ", d.error.message));
  jpeg_mem_src(&d.info, bytes.data(), static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&d.info, TRUE);
  // libjpeg converts no CMYK to RGB ("Unsupported color conversion request"): rows come as CMYK.
  const bool cmyk = d.info.jpeg_color_space == JCS_CMYK || d.info.jpeg_color_space == JCS_YCCK;
  d.info.out_color_space = cmyk ? JCS_CMYK : channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  d.info.scale_num = 1;
  d.info.scale_denom = static_cast<unsigned>(denom);
  jpeg_start_decompress(&d.info);
  const int whole_height = static_cast<int>(d.info.output_height);
  const int whole_width = static_cast<int>(d.info.output_width);
  // The region at this scale, one pixel wider each way for the bilinear taps at its edges.
  int y0 = 0, y1 = whole_height;
  JDIMENSION x0 = 0, width = static_cast<JDIMENSION>(whole_width);
  if (region.height > 0 && region.width > 0) {
    const double sy = static_cast<double>(whole_height) / h.height;
    const double sx = static_cast<double>(whole_width) / h.width;
    y0 = std::max(0, static_cast<int>(std::floor(region.top * sy)) - 1);
    y1 = std::min(whole_height, static_cast<int>(std::ceil((region.top + region.height) * sy)) + 1);
    const int left = std::max(0, static_cast<int>(std::floor(region.left * sx)) - 1);
    const int right = std::min(whole_width, static_cast<int>(std::ceil((region.left + region.width) * sx)) + 1);
    x0 = static_cast<JDIMENSION>(left);
    width = static_cast<JDIMENSION>(right - left);
    if (width < d.info.output_width) jpeg_crop_scanline(&d.info, &x0, &width);  // x0 to an iMCU edge
  }
  image.height = y1 - y0;
  image.width = static_cast<int>(width);
  image.channels = channels;
  image.top = y0;
  image.left = static_cast<int>(x0);
  image.whole_height = whole_height;
  image.whole_width = whole_width;
  image.pixels.resize(static_cast<size_t>(image.width) * image.height * channels);
  if (y0 > 0) jpeg_skip_scanlines(&d.info, static_cast<JDIMENSION>(y0));
  std::vector<uint8_t> inks(cmyk ? static_cast<size_t>(image.width) * 4 : 0);
  for (int row = 0; row < image.height; ++row) {
    uint8_t* out = image.pixels.data() + static_cast<size_t>(row) * image.width * channels;
    JSAMPROW line = cmyk ? inks.data() : out;
    jpeg_read_scanlines(&d.info, &line, 1);
    if (cmyk) cmyk_to_rgb(inks.data(), image.width, channels, out);
  }
  // A whole decode reads to the end marker, so damage after the last row is found too.
  if (y1 == whole_height && image.width == whole_width) jpeg_finish_decompress(&d.info);
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
