// Label checks for classification layers: labels are data, so a bad one is a DataError.
#include "cgdp/layers/class_labels.hpp"

#include <cmath>

#include "cgdp/layers/layer_errors.hpp"

namespace cgdp {

template <typename T>
ClassAxis class_axis(const Layer<T>& layer, const Blob<T>& scores, int axis,
                     const Blob<T>& labels) {
  ClassAxis ca;
  ca.axis = layer_axis(layer, scores.shape(), axis);
  ca.outer = scores.count(0, ca.axis);
  ca.classes = scores.shape(ca.axis);
  ca.inner = scores.count(ca.axis + 1);
  if (labels.count() != ca.outer * ca.inner)
    throw_layer_error<ModelError>(
        layer, cat("label blob of shape ", shape_string(labels.shape()), " holds ", labels.count(),
                   " labels, but predictions of shape ", shape_string(scores.shape()),
                   " with classes on axis ", ca.axis, " need ", ca.outer * ca.inner));
  if (ca.axis > 0 && scores.shape(0) > 0) ca.per_sample = ca.outer * ca.inner / scores.shape(0);
  return ca;
}

template <typename T>
int64_t class_label(const Layer<T>& layer, const ClassAxis& ca, const T* labels, int64_t position,
                    std::optional<int> ignore_label, int64_t sample_offset) {
  const T value = labels[position];
  const bool integral = std::isfinite(value) && std::floor(value) == value;
  if (integral) {
    const auto label = static_cast<int64_t>(value);
    if (ignore_label && label == *ignore_label) return -1;
    if (label >= 0 && label < ca.classes) return label;
  }
  throw_bad_label(layer, ca, value, position, ignore_label, sample_offset);
}

template <typename T>
void throw_bad_label(const Layer<T>& layer, const ClassAxis& ca, T value, int64_t position,
                     std::optional<int> ignore_label, int64_t sample_offset) {
  throw_layer_error<DataError>(
      layer, cat("label ", value, " of sample ", sample_offset + position / ca.per_sample,
                 " is not an integer class in [0, ", ca.classes, ")",
                 ignore_label ? cat(" nor ignore_label ", *ignore_label) : std::string()));
}

template ClassAxis class_axis(const Layer<float>&, const Blob<float>&, int, const Blob<float>&);
template ClassAxis class_axis(const Layer<double>&, const Blob<double>&, int, const Blob<double>&);
template int64_t class_label(const Layer<float>&, const ClassAxis&, const float*, int64_t,
                             std::optional<int>, int64_t);
template int64_t class_label(const Layer<double>&, const ClassAxis&, const double*, int64_t,
                             std::optional<int>, int64_t);
template void throw_bad_label(const Layer<float>&, const ClassAxis&, float, int64_t,
                              std::optional<int>, int64_t);
template void throw_bad_label(const Layer<double>&, const ClassAxis&, double, int64_t,
                              std::optional<int>, int64_t);

}  // namespace cgdp
