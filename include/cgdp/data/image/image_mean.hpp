// Caffe's compute_image_mean: the pixel-by-pixel mean of a training set's images, for --mean-file.
#pragma once

#include "cgdp/data/image/image_dataset.hpp"
#include "cgdp/data/image/mean_file.hpp"

namespace cgdp {

// The mean of every sample of `source` as stored (or resized by its options), C x H x W in Caffe's
// channel order, summed in double over `threads` threads. Every image must have the first one's
// size: DataError names the first that does not, and says to give --resize.
MeanImage compute_image_mean(const ImageSourceDataset& source, int threads);

}  // namespace cgdp
