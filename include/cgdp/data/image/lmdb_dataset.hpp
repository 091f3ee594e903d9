// A Dataset over a Caffe LMDB of Datum records (raw C x H x W BGR bytes, or an encoded JPEG/PNG),
// read through the same resize and transform as image files.
#pragma once

#include <string>

#include "cgdp.pb.h"
#include "cgdp/core/error.hpp"
#include "cgdp/core/excerpt.hpp"
#include "cgdp/data/image/datum.hpp"
#include "cgdp/data/image/image_dataset.hpp"
#include "cgdp/data/image/lmdb_database.hpp"

namespace cgdp {

class LmdbDataset final : public ImageSourceDataset {
 public:
  // `options.classes` bounds the labels (checked as records are read: a scan at open would read
  // every record).
  LmdbDataset(const std::string& path, ImageOptions options, std::string description);

  int64_t size() const override { return static_cast<int64_t>(db_.keys().size()); }
  int num_classes() const override { return options_.classes; }
  std::string where(int64_t index) const override {
    return cat(db_.path(), ": key '", excerpt(db_.keys().at(index)), "'");
  }

 private:
  void load(int64_t index, int& label, const DecodePlan& plan, Image& out) const override;
  proto::Datum datum(int64_t index) const;

  LmdbReader db_;
};

}  // namespace cgdp
