// Caffe's mean image files (.binaryproto, as compute_image_mean writes them): a 1 x C x H x W
// BlobProto in BGR order, subtracted pixel by pixel before the crop (caffe_transform.hpp).
#pragma once

#include <string>

#include "cgdp/data/image/caffe_transform.hpp"

namespace cgdp {

// Fills `t`'s mean image from `path`; DataError naming the file when it is not a 1 x C x H x W
// BlobProto whose data holds C*H*W values, or when `t` already has mean values (as Caffe, not both).
void load_mean_file(const std::string& path, CaffeTransform& t);

}  // namespace cgdp
