// Convolution algorithms chosen by cuDNN's own search (cudnnFind*AlgorithmEx: every candidate
// run and timed on the real problem), once per problem and GPU model in the process and kept in
// the ConvAlgorithmTable (checkpoints carry it), so every layer and worker with the same shapes on
// the same GPU model runs the same algorithm, and a resumed run the ones it ran before.
#pragma once

#include <cudnn.h>

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "cgdp/core/error.hpp"
#include "cgdp/device/conv_algorithm_table.hpp"
#include "cgdp/device/cuda_options.hpp"

namespace cgdp {

struct ConvAlgorithm {
  int algo = 0;            // a cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t
  size_t workspace = 0;    // bytes of scratch it needs
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;  // set on the descriptor before running it
};

// "<name> sm_<major><minor> cuDNN <version>" of CUDA device `device`: what a choice is keyed by.
std::string gpu_model(int device);

// The stored choice for (the model of GPU `device`, pass, problem), or `search()`'s, stored.
// `problem` names everything else the choice depends on (shapes, type, cuda_options()).
// Thread-safe.
ConvAlgorithm cached_conv_algorithm(ConvPass pass, int device, const std::vector<int64_t>& problem,
                                    const std::function<ConvAlgorithm()>& search);

// What a convolution multiplies: fp32 (TF32 only with --tf32), fp64, or 16-bit operands with
// fp32 sums (tensor cores always).
enum class ConvOperands { kFp32, kFp64, kHalf };

// The math type a convolution starts its search with: FMA-only for fp32 unless TF32 is on,
// tensor cores for 16 bits.
cudnnMathType_t initial_conv_math(ConvOperands operands, const CudaOptions& options);

// The first of cuDNN's results (fastest first) that ran, fits the workspace cap, and meets the
// TF32 and determinism settings; DeviceError naming `what` when none does.
template <typename Perf>
ConvAlgorithm pick_conv_algorithm(const Perf* results, int count, ConvOperands operands,
                                  const CudaOptions& options, const std::string& what) {
  const bool float_data = operands == ConvOperands::kFp32;
  for (int i = 0; i < count; ++i) {
    const Perf& r = results[i];
    const bool tensor_ops =
        r.mathType == CUDNN_TENSOR_OP_MATH || r.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
    if (r.status != CUDNN_STATUS_SUCCESS || r.memory > options.workspace_limit_bytes) continue;
    if (options.deterministic && r.determinism != CUDNN_DETERMINISTIC) continue;
    if (float_data && tensor_ops && !options.tf32) continue;
    // Without TF32, run FMA-only whatever cuDNN reports: its default math may pick TF32 kernels.
    return {static_cast<int>(r.algo), r.memory,
            float_data && !options.tf32 ? CUDNN_FMA_MATH : r.mathType};
  }
  throw DeviceError(cat(what, ": cuDNN found no algorithm among ", count, " candidates within ",
                        options.workspace_limit_bytes >> 20, " MiB of scratch",
                        options.deterministic ? " that is deterministic" : "",
                        float_data && !options.tf32 ? " without TF32" : "",
                        " (try --cudnn-workspace-mb",
                        options.deterministic ? ", --nondeterministic" : "",
                        float_data && !options.tf32 ? ", --tf32" : "", ")"));
}

}  // namespace cgdp
