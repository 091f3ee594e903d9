// A Dataset over a Caffe LMDB of Datum records (raw C x H x W BGR bytes, or an encoded JPEG/PNG),
// read through the same resize and transform as image files.
#pragma once

#include <string>

#include "cgdp.pb.h"
#include "cgdp/core/error.hpp"
#include "cgdp/data/image/image_dataset.hpp"
#include "cgdp/data/image/lmdb_database.hpp"

namespace cgdp {

// A Datum's picture as decode_image gives it (HWC, RGB or gray), to `channels`; DataError when
// the record is not a Caffe Datum or its sizes disagree with its bytes.
Image datum_image(const proto::Datum& datum, int channels, int min_height = 0, int min_width = 0);
void datum_image(const proto::Datum& datum, int channels, int min_height, int min_width, Image& out);
// Raw pixels of `image` (HWC RGB or gray) as Caffe stores them: C x H x W, BGR.
proto::Datum raw_datum(const Image& image, int label);

class LmdbDataset final : public ImageSourceDataset {
 public:
  // `options.classes` bounds the labels (checked as records are read: a scan at open would read
  // every record).
  LmdbDataset(const std::string& path, ImageOptions options, std::string description);

  int64_t size() const override { return static_cast<int64_t>(db_.keys().size()); }
  int num_classes() const override { return options_.classes; }
  std::string where(int64_t index) const override {
    return cat(db_.path(), ": key '", db_.keys().at(index), "'");
  }

 private:
  void load(int64_t index, int& label, const DecodePlan& plan, Image& out) const override;
  proto::Datum datum(int64_t index) const;

  LmdbReader db_;
};

}  // namespace cgdp
