// Dataset helpers shared by every implementation.
#include "cgdp/data/dataset.hpp"

#include <algorithm>
#include <exception>
#include <vector>

#include "cgdp/core/error.hpp"

namespace cgdp {

const char* to_string(Split split) {
  return split == Split::Train ? "train" : "test";
}

void read_samples(const Dataset& dataset, std::span<const int64_t> indices, float* images,
                  float* labels, int threads) {
  const int64_t elements = dataset.sample_elements();
  const int64_t rows = static_cast<int64_t>(indices.size());
  // An exception must not leave an OpenMP region, so it is kept and rethrown after it.
  std::exception_ptr error;
  int64_t error_row = rows;
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t i = 0; i < rows; ++i) {
    try {
      dataset.read(indices[i], images + i * elements, labels + i);
    } catch (...) {
#pragma omp critical(cgdp_read_samples)
      if (i < error_row) {
        error_row = i;
        error = std::current_exception();
      }
    }
  }
  if (error) std::rethrow_exception(error);
}

std::string content_summary(const Dataset& dataset, int64_t samples) {
  const int64_t n = std::min(samples, dataset.size());
  std::vector<float> image(static_cast<size_t>(dataset.sample_elements()));
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the samples' bytes
  for (int64_t i = 0; i < n; ++i) {
    float label = 0;
    dataset.read(i, image.data(), &label);
    const auto* bytes = reinterpret_cast<const unsigned char*>(image.data());
    for (size_t b = 0; b < image.size() * sizeof(float); ++b) h = (h ^ bytes[b]) * 1099511628211ull;
    h = (h ^ static_cast<uint64_t>(label)) * 1099511628211ull;
  }
  return cat(dataset.size(), " samples of ", shape_string(dataset.sample_shape()), ", ",
             dataset.num_classes(), " classes, first ", n, " hashed to ", h);
}

}  // namespace cgdp
