// Opens the dataset a command line names: "idx:DIR", "cifar10:DIR", "synthetic[:C,H,W,K]",
// "folder:DIR" (DIR/train/<class>/*, DIR/val/<class>/*) or "list:FILE[,ROOT]" (Caffe ImageData).
#pragma once

#include <memory>
#include <string>

#include "cgdp/data/dataset.hpp"
#include "cgdp/data/image/image_dataset.hpp"
#include "cgdp/data/synthetic_dataset.hpp"

namespace cgdp {

// `synthetic` takes its shape, class count, size and seed from `synthetic_defaults` (the trainer
// fills them from the model's input); "synthetic:C,H,W,K" overrides shape and class count. The
// test split of synthetic data uses seed + 1, so it differs from the training split.
// Throws UsageError for an unknown scheme (listing the known ones) or a malformed spec, and the
// readers' DataError for bad files.
// Image sources take their sample shape and transforms from `images` (channels, H x W, crop...),
// with random crops and mirrors in the train split.
std::unique_ptr<Dataset> open_dataset(const std::string& spec, Split split,
                                      const SyntheticSpec& synthetic_defaults = {},
                                      const ImageOptions& images = {});

}  // namespace cgdp
