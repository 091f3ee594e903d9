// Dataset helpers shared by every implementation.
#include "cgdp/data/dataset.hpp"

#include <algorithm>
#include <exception>
#include <numeric>
#include <string_view>
#include <vector>

#include "cgdp/core/counter_rng.hpp"
#include "cgdp/core/error.hpp"

namespace cgdp {

const char* to_string(Split split) {
  return split == Split::Train ? "train" : "test";
}

void read_samples(const Dataset& dataset, std::span<const int64_t> indices, float* images,
                  float* labels, int threads, std::span<const int64_t> epochs) {
  const int64_t elements = dataset.sample_elements();
  const int64_t rows = static_cast<int64_t>(indices.size());
  // An exception must not leave an OpenMP region, so it is kept and rethrown after it.
  std::exception_ptr error;
  int64_t error_row = rows;
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t i = 0; i < rows; ++i) {
    try {
      dataset.read_for_epoch(indices[i], epochs.empty() ? 0 : epochs[i], images + i * elements,
                             labels + i);
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
  std::vector<int64_t> first(static_cast<size_t>(n));
  std::iota(first.begin(), first.end(), 0);
  std::vector<float> values(static_cast<size_t>(n * (dataset.sample_elements() + 1)));
  read_samples(dataset, first, values.data(), values.data() + n * dataset.sample_elements());
  const std::string_view bytes(reinterpret_cast<const char*>(values.data()),
                               values.size() * sizeof(float));
  return cat(dataset.size(), " samples of ", shape_string(dataset.sample_shape()), ", ",
             dataset.num_classes(), " classes, first ", n, " hashed to ", hash_name(bytes));
}

}  // namespace cgdp
