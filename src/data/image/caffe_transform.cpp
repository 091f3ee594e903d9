// Caffe's DataTransformer::Transform(cv::Mat), pixel for pixel.
#include "cgdp/data/image/caffe_transform.hpp"

#include "cgdp/core/error.hpp"

namespace cgdp {

namespace {

// Uniform integer in [0, n) from draw i of `rng` (n is small: the bias of a multiply-shift of 53
// random bits is far below anything a crop could show).
int uniform_below(const CounterRng& rng, uint64_t i, int n) {
  return static_cast<int>(rng.uniform(i) * n);
}

void check_fits(const Image& image, const CaffeTransform& t) {
  if (t.crop_size > 0 && (image.height < t.crop_size || image.width < t.crop_size))
    throw DataError(cat("image of ", image.height, "x", image.width, " is smaller than crop_size ",
                        t.crop_size));
  // A decode of a region is checked as the whole image it is part of.
  const int H = image.picture_height(), W = image.picture_width();
  if (!t.mean_image.empty() &&
      (t.mean_height != H || t.mean_width != W ||
       t.mean_image.size() != static_cast<size_t>(image.channels) * H * W))
    throw DataError(cat("the mean image is ", t.mean_image.size() / std::max(1, t.mean_height * t.mean_width),
                        "x", t.mean_height, "x", t.mean_width, ", the image ", image.channels, "x",
                        H, "x", W, " (resize the images or recompute the mean)"));
}

float value_for(const std::vector<float>& values, int c, float otherwise) {
  return values.empty() ? otherwise : values[values.size() == 1 ? 0 : static_cast<size_t>(c)];
}

// The common case, colour with mean values: each source row is read once, its RGB triplets
// going to the three BGR planes (the general loop reads it once per channel, at stride 3).
void colour_rows(const Image& image, const ChannelNormalisation& n, const CropDraw& draw, int out_h,
                 int out_w, float* out) {
  const float* mean = n.mean.data();
  const float* gain = n.gain.data();
  const size_t plane = static_cast<size_t>(out_h) * out_w;
  for (int h = 0; h < out_h; ++h) {
    const uint8_t* row = &image.pixels[(static_cast<size_t>(h + draw.top) * image.width + draw.left) * 3];
    float* b = out + static_cast<size_t>(h) * out_w;
    float* g = b + plane;
    float* r = g + plane;
    if (draw.mirror) {
      for (int w = 0; w < out_w; ++w) {
        const uint8_t* px = row + static_cast<size_t>(out_w - 1 - w) * 3;
        b[w] = (px[2] - mean[0]) * gain[0];
        g[w] = (px[1] - mean[1]) * gain[1];
        r[w] = (px[0] - mean[2]) * gain[2];
      }
    } else {
      for (int w = 0; w < out_w; ++w) {
        const uint8_t* px = row + static_cast<size_t>(w) * 3;
        b[w] = (px[2] - mean[0]) * gain[0];
        g[w] = (px[1] - mean[1]) * gain[1];
        r[w] = (px[0] - mean[2]) * gain[2];
      }
    }
  }
}

}  // namespace

ChannelNormalisation channel_normalisation(const CaffeTransform& t, int channels) {
  for (const auto* values : {&t.mean_values, &t.std_values})
    if (values->size() > 1 && values->size() != static_cast<size_t>(channels))
      throw DataError(cat(values->size(), values == &t.std_values ? " std" : " mean",
                          " values for an image of ", channels, " channels; give one, or one per channel"));
  ChannelNormalisation n;
  for (int c = 0; c < channels; ++c) {
    n.mean.push_back(value_for(t.mean_values, c, 0.f));
    n.gain.push_back(t.scale / value_for(t.std_values, c, 1.f));
  }
  return n;
}

CropDraw draw_crop(const CaffeTransform& t, int height, int width, bool train, const CounterRng& rng) {
  CropDraw d;
  d.mirror = t.mirror && uniform_below(rng, 0, 2) == 1;
  if (t.crop_size > 0) {
    if (train) {
      d.top = uniform_below(rng, 1, height - t.crop_size + 1);
      d.left = uniform_below(rng, 2, width - t.crop_size + 1);
    } else {
      d.top = (height - t.crop_size) / 2;
      d.left = (width - t.crop_size) / 2;
    }
  }
  return d;
}

void apply_caffe_transform(const Image& image, const CaffeTransform& t, const CropDraw& draw,
                           float* out) {
  check_fits(image, t);
  const ChannelNormalisation n = channel_normalisation(t, image.channels);
  const int C = image.channels, H = image.height, W = image.width;
  const int out_h = t.crop_size > 0 ? t.crop_size : H;
  const int out_w = t.crop_size > 0 ? t.crop_size : W;
  if (C == 3 && t.mean_image.empty()) return colour_rows(image, n, draw, out_h, out_w, out);
  // A mirrored row is written right to left: start at its last column and step back.
  const ptrdiff_t step = draw.mirror ? -1 : 1;
  for (int c = 0; c < C; ++c) {
    const int source_c = C == 3 ? 2 - c : c;  // BGR, as Caffe's OpenCV-decoded images
    const float mean_value = n.mean[c], gain = n.gain[c];
    for (int h = 0; h < out_h; ++h) {
      const int y = h + draw.top;
      const uint8_t* pixel = &image.pixels[(static_cast<size_t>(y) * W + draw.left) * C + source_c];
      float* o = out + (static_cast<size_t>(c) * out_h + h) * out_w + (draw.mirror ? out_w - 1 : 0);
      if (t.mean_image.empty()) {
        for (int w = 0; w < out_w; ++w, o += step) *o = (pixel[w * C] - mean_value) * gain;
      } else {
        // The mean image covers the whole image, of which this decode may be a region.
        const size_t whole_w = static_cast<size_t>(image.picture_width());
        const float* mean = &t.mean_image[(static_cast<size_t>(c) * image.picture_height() + y + image.top) * whole_w +
                                          draw.left + image.left];
        for (int w = 0; w < out_w; ++w, o += step) *o = (pixel[w * C] - mean[w]) * gain;
      }
    }
  }
}

}  // namespace cgdp
