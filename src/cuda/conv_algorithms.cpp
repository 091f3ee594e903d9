// The convolution choices, kept in the process's ConvAlgorithmTable under the GPU's model.
#include "conv_algorithms.hpp"

#include <cuda_runtime.h>

#include <map>
#include <mutex>

#include "cgdp/device/conv_algorithm_table.hpp"
#include "cuda_check.hpp"

namespace cgdp {

std::string gpu_model(int device) {
  static std::mutex mutex;
  static std::map<int, std::string> models;
  const std::lock_guard lock(mutex);
  if (auto it = models.find(device); it != models.end()) return it->second;
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  return models[device] = cat(prop.name, " sm_", prop.major, prop.minor, " cuDNN ", cudnnGetVersion());
}

ConvAlgorithm cached_conv_algorithm(ConvPass pass, int device, const std::vector<int64_t>& problem,
                                    const std::function<ConvAlgorithm()>& search) {
  const ConvChoiceKey key{gpu_model(device), static_cast<int>(pass), problem};
  const ConvChoice c = ConvAlgorithmTable::process().find_or_search(key, [&] {
    const ConvAlgorithm a = search();
    return ConvChoice{a.algo, static_cast<int64_t>(a.workspace), static_cast<int>(a.math)};
  });
  return {c.algo, static_cast<size_t>(c.workspace), static_cast<cudnnMathType_t>(c.math)};
}

cudnnMathType_t initial_conv_math(ConvOperands operands, const CudaOptions& options) {
  if (operands == ConvOperands::kHalf) return CUDNN_TENSOR_OP_MATH;
  return operands == ConvOperands::kFp32 && !options.tf32 ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH;
}

}  // namespace cgdp
