// A dataset held in memory as byte pixels and byte labels: what the IDX and CIFAR-10 readers
// build, and what tests construct directly.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cgdp/data/dataset.hpp"

namespace cgdp {

class InMemoryDataset final : public Dataset {
 public:
  // `pixels` holds labels.size() images of count_of(sample_shape) bytes each, in C, H, W order.
  // Throws DataError if there are no samples, the sizes disagree or a label is >= num_classes.
  InMemoryDataset(std::string name, Shape sample_shape, int num_classes,
                  std::vector<uint8_t> pixels, std::vector<uint8_t> labels);

  std::string describe() const override { return name_; }
  int64_t size() const override { return static_cast<int64_t>(labels_.size()); }
  Shape sample_shape() const override { return sample_shape_; }
  int num_classes() const override { return num_classes_; }
  void read(int64_t index, float* image_out, float* label_out) const override;

 private:
  std::string name_;
  Shape sample_shape_;
  int num_classes_;
  std::vector<uint8_t> pixels_;
  std::vector<uint8_t> labels_;
};

// Throws DataError "FILE: label L at record R is out of range, expected 0..K-1" for the first
// label >= num_classes; record numbers start at `first_record`.
void check_labels(const uint8_t* labels, int64_t count, int num_classes, const std::string& file,
                  int64_t first_record = 0);

}  // namespace cgdp
