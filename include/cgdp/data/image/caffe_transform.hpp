// Caffe's DataTransformer on one decoded image: crop (random in training, centred in testing),
// mirror (a coin per image when `mirror`), mean subtraction (an image or per-channel values) and
// scale, written as C x crop x crop floats in Caffe's channel order (BGR for colour images, as
// OpenCV decodes them). Random draws come from a key (seed, epoch, sample), so any split of a
// batch over threads or workers, and a resume, draw the same crops.
#pragma once

#include <cstdint>
#include <vector>

#include "cgdp/core/counter_rng.hpp"
#include "cgdp/data/image/image.hpp"

namespace cgdp {

struct CaffeTransform {
  float scale = 1.f;
  bool mirror = false;
  int crop_size = 0;               // 0: no crop
  std::vector<float> mean_values;  // none, one for every channel, or one per channel (BGR)
  // cgdp's addition for the torchvision recipe: (pixel - mean) / std * scale; none, one or per channel
  std::vector<float> std_values;
  std::vector<float> mean_image;   // C x H x W of the uncropped image (a mean.binaryproto), or none
  int mean_height = 0, mean_width = 0;
};

// out = (pixel - mean[c]) * gain[c] for output channel c, from mean_values, std_values and scale.
struct ChannelNormalisation {
  std::vector<float> mean, gain;
};
// Throws DataError when mean_values or std_values hold neither one value nor one per channel.
ChannelNormalisation channel_normalisation(const CaffeTransform& t, int channels);

// Where one image's crop sits and whether it is mirrored.
struct CropDraw {
  int top = 0, left = 0;
  bool mirror = false;
};

// The draw for an H x W image: random (from `rng`) when `train`, else the centre and no mirror
// unless `mirror` is set (Caffe mirrors in any phase whose transform_param says so).
CropDraw draw_crop(const CaffeTransform& t, int height, int width, bool train, const CounterRng& rng);

// Writes the transformed image (C x out_h x out_w, out = crop_size or the image's own size).
// Throws DataError when the image is smaller than the crop or the mean does not fit it.
void apply_caffe_transform(const Image& image, const CaffeTransform& t, const CropDraw& draw,
                           float* out);

}  // namespace cgdp
