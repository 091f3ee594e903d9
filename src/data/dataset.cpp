// Dataset helpers shared by every implementation.
#include "cgdp/data/dataset.hpp"

#include <exception>

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

}  // namespace cgdp
