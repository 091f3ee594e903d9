// A Dataset over a Caffe LMDB of Datum records (raw C x H x W BGR bytes, or an encoded JPEG/PNG),
// read through the same resize and transform as image files.
#pragma once

#include <string>

#include "cgdp.pb.h"
#include "cgdp/data/image/image_dataset.hpp"
#include "cgdp/data/image/lmdb_database.hpp"

namespace cgdp {

// A Datum's picture as decode_image gives it (HWC, RGB or gray), to `channels`; DataError when
// the record is not a Caffe Datum or its sizes disagree with its bytes.
Image datum_image(const proto::Datum& datum, int channels, int min_height = 0, int min_width = 0);
// Raw pixels of `image` (HWC RGB or gray) as Caffe stores them: C x H x W, BGR.
proto::Datum raw_datum(const Image& image, int label);

class LmdbDataset final : public Dataset {
 public:
  LmdbDataset(const std::string& path, ImageOptions options, std::string description);

  std::string describe() const override { return description_; }
  int64_t size() const override { return static_cast<int64_t>(db_.keys().size()); }
  Shape sample_shape() const override;
  int num_classes() const override { return num_classes_; }
  void read(int64_t index, float* image_out, float* label_out) const override {
    read_for_epoch(index, 0, image_out, label_out);
  }
  void read_for_epoch(int64_t index, int64_t epoch, float* image_out, float* label_out) const override;
  std::string skipped_summary() const override { return skipped_->summary(description_); }

 private:
  proto::Datum datum(int64_t index) const;
  void read_one(int64_t index, int64_t epoch, float* image_out, float* label_out) const;

  LmdbReader db_;
  ImageOptions options_;
  std::string description_;
  int num_classes_ = 0;
  std::unique_ptr<SkippedImages> skipped_ = std::make_unique<SkippedImages>();
};

}  // namespace cgdp
