// In-memory byte dataset: validation at construction, byte-to-float conversion on read.
#include "cgdp/data/in_memory_dataset.hpp"

#include "cgdp/core/error.hpp"

namespace cgdp {

void check_labels(const uint8_t* labels, int64_t count, int num_classes, const std::string& file,
                  int64_t first_record) {
  for (int64_t i = 0; i < count; ++i)
    if (labels[i] >= num_classes)
      throw DataError(cat(file, ": label ", int{labels[i]}, " at record ", first_record + i,
                          " is out of range, expected 0..", num_classes - 1));
}

InMemoryDataset::InMemoryDataset(std::string name, Shape sample_shape, int num_classes,
                                 std::vector<uint8_t> pixels, std::vector<uint8_t> labels)
    : name_(std::move(name)),
      sample_shape_(std::move(sample_shape)),
      num_classes_(num_classes),
      pixels_(std::move(pixels)),
      labels_(std::move(labels)) {
  if (sample_shape_.size() != 3 || count_of(sample_shape_) <= 0)
    throw DataError(cat(name_, ": sample shape ", shape_string(sample_shape_),
                        " is not C x H x W with positive dimensions"));
  if (num_classes_ <= 0) throw DataError(cat(name_, ": needs at least one class"));
  if (labels_.empty()) throw DataError(cat(name_, ": holds no samples"));
  const int64_t expected = size() * count_of(sample_shape_);
  if (static_cast<int64_t>(pixels_.size()) != expected)
    throw DataError(cat(name_, ": expected ", expected, " pixel bytes for ", size(), " images of ",
                        shape_string(sample_shape_), ", got ", pixels_.size()));
  check_labels(labels_.data(), size(), num_classes_, name_);
}

void InMemoryDataset::read(int64_t index, float* image_out, float* label_out) const {
  CGDP_ASSERT(index >= 0 && index < size());
  const int64_t elements = count_of(sample_shape_);
  const uint8_t* src = pixels_.data() + index * elements;
  for (int64_t i = 0; i < elements; ++i) image_out[i] = src[i] * kPixelScale;
  *label_out = static_cast<float>(labels_[index]);
}

}  // namespace cgdp
