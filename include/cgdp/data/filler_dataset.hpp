// Samples made by Caffe's fillers, as its DummyData layer fills its tops: constant, uniform or
// gaussian values for the data, a constant (or uniform integer) label. Random fillers draw anew
// each epoch from (seed, epoch, sample), as Caffe refills them on every forward.
#pragma once

#include <cstdint>
#include <string>

#include "cgdp/data/dataset.hpp"

namespace cgdp {

struct ValueFiller {
  std::string type = "constant";  // constant, uniform or gaussian
  float value = 0, min = 0, max = 1, mean = 0, std = 1;
};

struct FillerDatasetSpec {
  Shape sample;  // {C, H, W}
  ValueFiller data, label;
  int64_t size = 1;  // samples per epoch: the layer's batch, refilled every epoch
  int num_classes = 0;
  uint64_t seed = 1;
  std::string description;
};

class FillerDataset final : public Dataset {
 public:
  // Throws DataError for an unknown filler type or a constant label outside [0, num_classes).
  explicit FillerDataset(FillerDatasetSpec spec);

  std::string describe() const override { return spec_.description; }
  int64_t size() const override { return spec_.size; }
  Shape sample_shape() const override { return spec_.sample; }
  int num_classes() const override { return spec_.num_classes; }
  void read(int64_t index, float* image_out, float* label_out) const override {
    read_for_epoch(index, 0, image_out, label_out);
  }
  void read_for_epoch(int64_t index, int64_t epoch, float* image_out, float* label_out) const override;

 private:
  FillerDatasetSpec spec_;
};

}  // namespace cgdp
