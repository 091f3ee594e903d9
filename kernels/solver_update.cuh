// Launchers for the GPU solver step (kernels/solver_update.cu), in stream order: the twins of
// src/solver/update_rule.cpp's solver_update and of the clip's sum of squares.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "sum_squares_scratch.cuh"

namespace cgdp::kernels {

// Which rule, as cgdp::SolverType (kept apart so nvcc needs no cgdp header).
enum class Rule : int { kSgd, kNesterov, kAdaGrad, kRmsProp, kAdaDelta, kAdam };

struct RuleScalars {
  Rule rule = Rule::kSgd;
  double grad_scale = 1, lr = 0, decay = 0, momentum = 0, delta = 1e-8, momentum2 = 0.999, rms_decay = 0.99;
  double adam_rate = 0;  // Adam: lr * sqrt(1 - beta2^t) / (1 - beta1^t)
};

// For i in [0, n): g = T(double(diff) * grad_scale) + decay * data, then the rule (update_rule.hpp).
// `history2` is read and written by AdaDelta and Adam only.
template <typename T>
void solver_update(T* data, const T* diff, T* history, T* history2, int64_t n, const RuleScalars& k,
                   cudaStream_t stream);

// out[0] = sum of x[i]^2 over [0, n), in float64 and a fixed order: each of kSumSquaresBlocks
// blocks sums a grid-stride share into out[1 + b], then one block adds those. `out` holds
// kSumSquaresBlocks + 1 doubles.
template <typename T>
void sum_squares(const T* x, int64_t n, double* out, cudaStream_t stream);

}  // namespace cgdp::kernels
