// torchvision's recipe for modern training: RandomResizedCrop(size) with its scale and ratio
// defaults, bilinear, an optional horizontal flip, then per-channel mean and std, in RGB order.
// The evaluation counterpart is Resize(size * 256 / 224) + CenterCrop(size). Draws come from a
// key (seed, epoch, sample), so N workers, any thread count and a resume crop the same boxes.
#pragma once

#include <cstdint>

#include "cgdp/core/counter_rng.hpp"
#include "cgdp/data/image/caffe_transform.hpp"
#include "cgdp/data/image/image.hpp"

namespace cgdp {

struct RandomResizedCrop {
  int size = 0;  // output is size x size; 0: the recipe is off (Caffe's transform applies)
  double scale_min = 0.08, scale_max = 1.0;         // of the image's area
  double ratio_min = 3.0 / 4.0, ratio_max = 4.0 / 3.0;  // width / height
};

// torchvision's RandomResizedCrop.get_params on an H x W image: ten tries of an area fraction
// uniform in [scale_min, scale_max] and a log-uniform aspect ratio; the first box that fits, at a
// uniform position; else the whole image clamped to the ratio range, centred. Uses draws 0-39.
CropBox draw_resized_crop(const RandomResizedCrop& rrc, int height, int width, const CounterRng& rng);

// The evaluation box: the centred square that Resize(size*256/224) + CenterCrop(size) keeps.
CropBox centre_crop_box(int height, int width);

// Whether to flip, from draw 40 (a coin), when `mirror` is asked for.
bool draw_flip(bool mirror, const CounterRng& rng);

// The least decoded size (height, width) at which `box` of an H x W image still covers `size`
// pixels each way: a JPEG may then be decoded DCT-scaled down to it.
std::pair<int, int> least_decode_size(const CropBox& box, int height, int width, int size);

// Samples `box` (in the coordinates of a full_height x full_width image, of which `image` may be
// a scaled decode of a region: see Image::top) bilinearly to size x size, flips it when `flip`, and writes
// ((pixel - mean[c]) / std[c]) * scale as C x size x size floats, channels in RGB order.
// `t` gives mean_values, std_values and scale; its crop, mirror and mean image are not used.
void apply_resized_crop(const Image& image, int full_height, int full_width, const CropBox& box,
                        bool flip, int size, const CaffeTransform& t, float* out);

}  // namespace cgdp
