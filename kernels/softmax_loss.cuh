// Launchers for SoftmaxWithLoss's loss and gradient, on probabilities and decoded labels.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "class_labels.cuh"

namespace cgdp::kernels {

// Caffe's LossParameter.NormalizationMode, in its order.
enum class LossNormalization { Full = 0, Valid = 1, BatchSize = 2, None = 3 };

// loss[0] = T(-sum over labelled positions of log(max(prob of the label, FLT_MIN)) / normalizer),
// the sum in float64; *normalizer (kept for backward) = max(1, FULL: outer * inner, VALID:
// labelled positions, BATCH_SIZE: outer, NONE: 1).
template <typename T>
void softmax_loss_forward(const T* prob, const int64_t* labels, const ClassShape& shape,
                          LossNormalization mode, T* loss, double* normalizer, cudaStream_t stream);
// dx = (prob - onehot(label)) * T(loss_diff[0] / normalizer); zero where the label is ignored.
template <typename T>
void softmax_loss_backward(const T* prob, const int64_t* labels, const ClassShape& shape,
                           const T* loss_diff, const double* normalizer, T* dx, cudaStream_t stream);

}  // namespace cgdp::kernels
