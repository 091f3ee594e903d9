// CudaLabels: decode kernel, then the error record copied to pinned memory and checked by a host
// function in stream order (a throw there fails the stream; synchronize() rethrows it).
#include "class_labels_cuda.hpp"

#include "cuda_layer.hpp"

namespace cgdp {

static_assert(cuda_label_bytes(ClassAxis{1, 1, 2, 1}) ==
                  sizeof(int64_t) + sizeof(kernels::LabelError),
              "cuda_label_bytes (class_labels.hpp) counts one LabelError");

template <typename T>
const int64_t* CudaLabels<T>::decode(const Layer<T>& layer, const ClassAxis& ca, const T* labels,
                                     std::optional<int> ignore_label, int64_t sample_offset,
                                     Stream& stream) {
  using kernels::LabelError;
  int64_t* decoded = ensure_buffer<int64_t>(decoded_, device_, stream, ca.outer * ca.inner);
  auto* error = ensure_buffer<LabelError>(error_, device_, stream, 1);
  if (!report_.get()) report_ = PinnedHostBuffer(device_, sizeof(LabelError));
  kernels::decode_labels(labels, {ca.outer, ca.classes, ca.inner}, ignore_label.has_value(),
                         ignore_label.value_or(0), decoded, error, native_stream(stream));
  auto* report = static_cast<LabelError*>(report_.get());
  stream.copy_async(report, error, sizeof(LabelError));
  stream.launch_host_func([&layer, ca, ignore_label, sample_offset, report] {
    if (report->position != kernels::kNoLabelError)
      throw_bad_label(layer, ca, static_cast<T>(report->value),
                      static_cast<int64_t>(report->position), ignore_label, sample_offset);
  });
  return decoded;
}

template class CudaLabels<float>;
template class CudaLabels<double>;

}  // namespace cgdp
