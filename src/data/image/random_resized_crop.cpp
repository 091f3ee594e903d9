// RandomResizedCrop's box (torchvision's get_params, draw for draw) and the fused
// crop + bilinear resize + flip + normalise that writes a sample straight into the batch.
#include "cgdp/data/image/random_resized_crop.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "cgdp/core/error.hpp"

namespace cgdp {

namespace {

// Python's round() on a double: halves go to the even neighbour, as nearbyint does by default.
int round_half_even(double v) { return static_cast<int>(std::nearbyint(v)); }

// Uniform integer in [0, n).
int uniform_below(const CounterRng& rng, uint64_t i, int n) {
  return std::min(n - 1, static_cast<int>(rng.uniform(i) * n));
}

// One output coordinate's two source taps and the weight of the second (pixel centres aligned).
struct Tap {
  int i0 = 0, i1 = 0;
  float frac = 0;
};

std::vector<Tap> taps(double start, double step, int count, int limit) {
  std::vector<Tap> out(static_cast<size_t>(count));
  for (int o = 0; o < count; ++o) {
    const double pos = std::clamp(start + (o + 0.5) * step - 0.5, 0.0, limit - 1.0);
    Tap& t = out[static_cast<size_t>(o)];
    t.i0 = static_cast<int>(pos);
    t.i1 = std::min(t.i0 + 1, limit - 1);
    t.frac = static_cast<float>(pos - t.i0);
  }
  return out;
}

// Separable bilinear: for each output row, the two source rows are blended down over the box's
// columns (contiguous, so it vectorises), then that one row is sampled across and normalised
// into the C planes.
template <int C>
void resample(const Image& image, const std::vector<Tap>& rows, const std::vector<Tap>& cols,
              bool flip, int size, const float* mean, const float* gain, float* out) {
  const int first = cols.front().i0, last = cols.back().i1;  // taps rise with x
  const size_t span = static_cast<size_t>(last - first + 1) * C;
  const size_t stride = static_cast<size_t>(image.width) * C, plane = static_cast<size_t>(size) * size;
  thread_local std::vector<float> blended;
  blended.resize(span);
  for (int y = 0; y < size; ++y) {
    const Tap& r = rows[static_cast<size_t>(y)];
    const uint8_t* a = image.pixels.data() + r.i0 * stride + static_cast<size_t>(first) * C;
    const uint8_t* b = image.pixels.data() + r.i1 * stride + static_cast<size_t>(first) * C;
    const float f = r.frac;
    float* row = blended.data();
    for (size_t i = 0; i < span; ++i) row[i] = a[i] + (static_cast<float>(b[i]) - a[i]) * f;
    float* o = out + static_cast<size_t>(y) * size;
    for (int x = 0; x < size; ++x) {
      const Tap& k = cols[static_cast<size_t>(x)];
      const float* p0 = row + static_cast<size_t>(k.i0 - first) * C;
      const float* p1 = row + static_cast<size_t>(k.i1 - first) * C;
      const int column = flip ? size - 1 - x : x;
      for (int c = 0; c < C; ++c)
        o[c * plane + column] = (p0[c] + (p1[c] - p0[c]) * k.frac - mean[c]) * gain[c];
    }
  }
}

}  // namespace

CropBox draw_resized_crop(const RandomResizedCrop& rrc, int height, int width, const CounterRng& rng) {
  const double area = static_cast<double>(height) * width;
  const double log_min = std::log(rrc.ratio_min), log_max = std::log(rrc.ratio_max);
  for (uint64_t attempt = 0; attempt < 10; ++attempt) {
    const uint64_t d = attempt * 4;
    const double target = area * (rrc.scale_min + (rrc.scale_max - rrc.scale_min) * rng.uniform(d));
    const double aspect = std::exp(log_min + (log_max - log_min) * rng.uniform(d + 1));
    const int w = round_half_even(std::sqrt(target * aspect));
    const int h = round_half_even(std::sqrt(target / aspect));
    if (0 < w && w <= width && 0 < h && h <= height)
      return {uniform_below(rng, d + 2, height - h + 1), uniform_below(rng, d + 3, width - w + 1), h, w};
  }
  const double in_ratio = static_cast<double>(width) / height;
  int w = width, h = height;
  if (in_ratio < rrc.ratio_min)
    h = round_half_even(w / rrc.ratio_min);
  else if (in_ratio > rrc.ratio_max)
    w = round_half_even(h * rrc.ratio_max);
  return {(height - h) / 2, (width - w) / 2, h, w};
}

CropBox centre_crop_box(int height, int width) {
  // Resize(size*256/224) scales the shorter side; CenterCrop(size) keeps 224/256 of it.
  const int side = std::max(1, round_half_even(std::min(height, width) * 224.0 / 256.0));
  return {(height - side) / 2, (width - side) / 2, side, side};
}

bool draw_flip(bool mirror, const CounterRng& rng) { return mirror && rng.uniform(40) >= 0.5; }

std::pair<int, int> least_decode_size(const CropBox& box, int height, int width, int size) {
  auto least = [size](int full, int part) {
    return std::min(full, static_cast<int>(std::ceil(static_cast<double>(full) * size / part)));
  };
  return {least(height, box.height), least(width, box.width)};
}

void apply_resized_crop(const Image& image, int full_height, int full_width, const CropBox& box,
                        bool flip, int size, const CaffeTransform& t, float* out) {
  const ChannelNormalisation n = channel_normalisation(t, image.channels);
  // The box in the decoded pixels: a DCT-scaled decode is smaller than the stored image, and a
  // region's decode starts at (image.top, image.left) of it.
  const double fy = static_cast<double>(image.picture_height()) / full_height;
  const double fx = static_cast<double>(image.picture_width()) / full_width;
  const std::vector<Tap> rows = taps(box.top * fy - image.top, box.height * fy / size, size, image.height);
  const std::vector<Tap> cols = taps(box.left * fx - image.left, box.width * fx / size, size, image.width);
  if (image.channels == 3)
    resample<3>(image, rows, cols, flip, size, n.mean.data(), n.gain.data(), out);
  else
    resample<1>(image, rows, cols, flip, size, n.mean.data(), n.gain.data(), out);
}

}  // namespace cgdp
