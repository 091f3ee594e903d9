// Class labels on the GPU (SoftmaxWithLoss, Accuracy): decoding the float labels into class
// indices, and recording the first bad one for the host to report as the CPU layer would.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace cgdp::kernels {

// Scores split at the class axis: outer x classes x inner; one label per (outer, inner).
struct ClassShape {
  int64_t outer = 0, classes = 0, inner = 0;
};

// The first label (lowest position) that is not an integer class, and its value.
struct LabelError {
  unsigned long long position;  // kNoLabelError: every label was fine
  double value;
};
constexpr unsigned long long kNoLabelError = ~0ull;

// out[p] = the class labels[p] holds, or -1 for ignore_label (when has_ignore) and for a bad
// value, which *error records (reset here first; error->value is set when position is not
// kNoLabelError). Later kernels treat bad labels as ignored, so nothing indexes out of range.
template <typename T>
void decode_labels(const T* labels, const ClassShape& shape, bool has_ignore, int64_t ignore,
                   int64_t* out, LabelError* error, cudaStream_t stream);

}  // namespace cgdp::kernels
