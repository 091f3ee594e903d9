// Random images and labels of any shape, generated on read from (seed, index): for benchmarks
// that must not wait on data files.
#pragma once

#include <cstdint>
#include <string>

#include "cgdp/data/dataset.hpp"

namespace cgdp {

struct SyntheticSpec {
  int64_t channels = 1;
  int64_t height = 28;
  int64_t width = 28;
  int num_classes = 10;
  int64_t size = 60000;  // samples
  uint64_t seed = 1;
};

class SyntheticDataset final : public Dataset {
 public:
  // Throws UsageError for non-positive dimensions, class count or size.
  explicit SyntheticDataset(const SyntheticSpec& spec);

  std::string describe() const override;
  int64_t size() const override { return spec_.size; }
  Shape sample_shape() const override { return {spec_.channels, spec_.height, spec_.width}; }
  int num_classes() const override { return spec_.num_classes; }
  // Pixels are random bytes times kPixelScale, like the file datasets; the same (seed, index)
  // always gives the same sample.
  void read(int64_t index, float* image_out, float* label_out) const override;

 private:
  SyntheticSpec spec_;
};

}  // namespace cgdp
