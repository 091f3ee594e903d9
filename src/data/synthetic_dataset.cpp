// Synthetic dataset: a counter-based generator, so any sample can be made without the others.
#include "cgdp/data/synthetic_dataset.hpp"

#include <algorithm>
#include <cstring>

#include "cgdp/core/error.hpp"

namespace cgdp {

namespace {

// SplitMix64's output function: a good 64-bit mix of a counter.
uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

SyntheticDataset::SyntheticDataset(const SyntheticSpec& spec) : spec_(spec) {
  if (spec.channels <= 0 || spec.height <= 0 || spec.width <= 0 || spec.num_classes <= 0 ||
      spec.size <= 0)
    throw UsageError(
        cat("synthetic data needs positive channels, height, width, classes and "
            "size; got ",
            spec.channels, ",", spec.height, ",", spec.width, " classes ", spec.num_classes,
            " size ", spec.size));
}

std::string SyntheticDataset::describe() const {
  return cat("synthetic:", spec_.channels, ",", spec_.height, ",", spec_.width, ",",
             spec_.num_classes, " (", spec_.size, " samples, seed ", spec_.seed, ")");
}

void SyntheticDataset::read(int64_t index, float* image_out, float* label_out) const {
  CGDP_ASSERT(index >= 0 && index < spec_.size);
  const uint64_t key = mix64(spec_.seed ^ mix64(static_cast<uint64_t>(index)));
  *label_out = static_cast<float>(key % static_cast<uint64_t>(spec_.num_classes));
  // Each 64-bit draw gives eight pixel bytes; eight at a time vectorizes.
  const int64_t elements = sample_elements();
  for (int64_t i = 0; i < elements; i += 8) {
    uint8_t bytes[8];
    const uint64_t bits = mix64(key + static_cast<uint64_t>(i));
    std::memcpy(bytes, &bits, 8);
    const int64_t n = std::min<int64_t>(8, elements - i);
    for (int64_t j = 0; j < n; ++j) image_out[i + j] = bytes[j] * kPixelScale;
  }
}

}  // namespace cgdp
