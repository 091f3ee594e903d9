// Caffe's mean image files (.binaryproto, as compute_image_mean writes them): a 1 x C x H x W
// BlobProto in BGR order, subtracted pixel by pixel before the crop (caffe_transform.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cgdp/data/image/caffe_transform.hpp"

namespace cgdp {

// Fills `t`'s mean image from `path`; DataError naming the file when it is not a 1 x C x H x W
// BlobProto whose data holds C*H*W values, or when `t` already has mean values (as Caffe, not both).
void load_mean_file(const std::string& path, CaffeTransform& t);

// A mean image: C x H x W floats, channels in Caffe's order (BGR for colour).
struct MeanImage {
  int channels = 0, height = 0, width = 0;
  std::vector<float> values;
  int64_t images = 0;  // how many it averages
};

// Writes `mean` as compute_image_mean does (1 x C x H x W, num/channels/height/width fields),
// atomically.
void write_mean_file(const MeanImage& mean, const std::string& path);

}  // namespace cgdp
