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
  if (!t.mean_image.empty() &&
      (t.mean_height != image.height || t.mean_width != image.width ||
       t.mean_image.size() != static_cast<size_t>(image.channels) * image.height * image.width))
    throw DataError(cat("the mean image is ", t.mean_image.size() / std::max(1, t.mean_height * t.mean_width),
                        "x", t.mean_height, "x", t.mean_width, ", the image ", image.channels, "x",
                        image.height, "x", image.width, " (resize the images or recompute the mean)"));
  for (const auto* values : {&t.mean_values, &t.std_values})
    if (values->size() > 1 && values->size() != static_cast<size_t>(image.channels))
      throw DataError(cat(values->size(), values == &t.std_values ? " std" : " mean",
                          " values for an image of ", image.channels,
                          " channels; give one, or one per channel"));
}

}  // namespace

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
  const int C = image.channels, H = image.height, W = image.width;
  const int out_h = t.crop_size > 0 ? t.crop_size : H;
  const int out_w = t.crop_size > 0 ? t.crop_size : W;
  for (int c = 0; c < C; ++c) {
    const int source_c = C == 3 ? 2 - c : c;  // BGR, as Caffe's OpenCV-decoded images
    const float mean_value =
        t.mean_values.empty() ? 0.f : t.mean_values[t.mean_values.size() == 1 ? 0 : c];
    const float gain =
        t.scale / (t.std_values.empty() ? 1.f : t.std_values[t.std_values.size() == 1 ? 0 : c]);
    for (int h = 0; h < out_h; ++h) {
      const int y = h + draw.top;
      for (int w = 0; w < out_w; ++w) {
        const int x = w + draw.left;
        const float pixel = image.at(y, x, source_c);
        const float mean = t.mean_image.empty()
                               ? mean_value
                               : t.mean_image[(static_cast<size_t>(c) * H + y) * W + x];
        const int column = draw.mirror ? out_w - 1 - w : w;
        out[(static_cast<size_t>(c) * out_h + h) * out_w + column] = (pixel - mean) * gain;
      }
    }
  }
}

}  // namespace cgdp
