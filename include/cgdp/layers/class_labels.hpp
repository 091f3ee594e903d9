// Class labels as data layers deliver them (floating-point values, one per prediction): the shape
// check and the value check shared by SoftmaxWithLoss and Accuracy.
#pragma once

#include <optional>

#include "cgdp/layers/layer.hpp"

namespace cgdp {

// A score blob split at its class axis: outer x classes x inner.
struct ClassAxis {
  int axis = 1;
  int64_t outer = 0;
  int64_t classes = 0;
  int64_t inner = 0;
  int64_t per_sample = 1;  // predictions per sample (first dimension), to name a bad label's sample
};

// Device bytes a CUDA layer's decoded labels take (CudaLabels: an index per position and one
// error record, kernels::LabelError).
constexpr int64_t cuda_label_bytes(const ClassAxis& ca) {
  return ca.outer * ca.inner * static_cast<int64_t>(sizeof(int64_t)) + 16;
}

// Splits `scores` at `axis` and checks that `labels` holds outer * inner values; throws a
// ModelError naming the layer and both shapes otherwise.
template <typename T>
ClassAxis class_axis(const Layer<T>& layer, const Blob<T>& scores, int axis, const Blob<T>& labels);

// The class index held by labels[position] (position = o * inner + i), or -1 for ignore_label.
// Throws a DataError naming the layer, the sample, the value and the expected range when the
// value is not an integer in [0, classes).
template <typename T>
int64_t class_label(const Layer<T>& layer, const ClassAxis& ca, const T* labels, int64_t position,
                    std::optional<int> ignore_label, int64_t sample_offset);

// The DataError class_label() throws for a bad `value` at `position` (shared with the CUDA
// layers, which find bad labels on the device and report them from the stream).
template <typename T>
[[noreturn]] void throw_bad_label(const Layer<T>& layer, const ClassAxis& ca, T value,
                                  int64_t position, std::optional<int> ignore_label,
                                  int64_t sample_offset);

}  // namespace cgdp
