// Class labels of a CUDA classification layer (SoftmaxWithLoss, Accuracy): decoded on the device
// each forward; a bad one fails the stream with the CPU layer's DataError when the stream gets
// there (the host cannot look without waiting for the GPU).
#pragma once

#include <optional>

#include "cgdp/layers/class_labels.hpp"
#include "class_labels.cuh"

namespace cgdp {

template <typename T>
class CudaLabels {
 public:
  explicit CudaLabels(Device& device) : device_(device) {}

  // Decodes `labels` (one per position of `ca`) into class indices (-1: ignored, or bad) on
  // `stream` and queues the check; returns the device array of indices.
  const int64_t* decode(const Layer<T>& layer, const ClassAxis& ca, const T* labels,
                        std::optional<int> ignore_label, int64_t sample_offset, Stream& stream);

 private:
  Device& device_;
  DeviceBuffer decoded_;
  DeviceBuffer error_;        // one kernels::LabelError
  PinnedHostBuffer report_;   // its copy, read by a host function on the stream
};

}  // namespace cgdp
