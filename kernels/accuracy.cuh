// Launcher for Accuracy's top-k count on scores and decoded labels.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "class_labels.cuh"

namespace cgdp::kernels {

// out[0] = correct / counted over labelled positions (0 when none), where a position is correct
// when at most top_k classes score >= the label's score (ties count against, as Caffe).
template <typename T>
void accuracy(const T* scores, const int64_t* labels, const ClassShape& shape, int64_t top_k, T* out,
              cudaStream_t stream);

}  // namespace cgdp::kernels
