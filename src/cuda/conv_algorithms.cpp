// The process-wide cache of chosen convolution algorithms.
#include "conv_algorithms.hpp"

#include <map>
#include <mutex>
#include <utility>

namespace cgdp {

ConvAlgorithm cached_conv_algorithm(ConvPass pass, const std::vector<int64_t>& problem,
                                    const std::function<ConvAlgorithm()>& search) {
  static std::mutex mutex;
  static std::map<std::pair<ConvPass, std::vector<int64_t>>, ConvAlgorithm> cache;
  // Held during the search, so two callers never search the same problem twice.
  std::lock_guard lock(mutex);
  const auto key = std::make_pair(pass, problem);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  const ConvAlgorithm choice = search();
  cache.emplace(key, choice);
  return choice;
}

cudnnMathType_t initial_conv_math(bool float_data, const CudaOptions& options) {
  return float_data && !options.tf32 ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH;
}

}  // namespace cgdp
