// Reshape and Flatten on the CPU: the shape rules, and a copy each way.
#include "cgdp/layers/reshape_layer.hpp"

#include <algorithm>
#include <cstring>

#include "cgdp/layers/layer_errors.hpp"

namespace cgdp {

template <typename T>
void ShapeOnlyLayer<T>::reshape(const BlobVec<T>& bottom, const BlobVec<T>& top) {
  if (top[0] == bottom[0]) this->fail("cannot run in place (its top has another shape)");
  const Shape shape = top_shape(bottom[0]->shape());
  if (count_of(shape) != bottom[0]->count())
    this->fail(cat("output shape ", shape_string(shape), " holds ", count_of(shape), " elements, the bottom ",
                   shape_string(bottom[0]->shape()), " holds ", bottom[0]->count()));
  top[0]->reshape(shape);
}

template <typename T>
void ShapeOnlyLayer<T>::forward_cpu(const RunContext&, const BlobVec<T>& bottom, const BlobVec<T>& top) {
  std::memcpy(top[0]->mutable_data(), bottom[0]->data(), bottom[0]->bytes());
}

template <typename T>
void ShapeOnlyLayer<T>::backward_cpu(const RunContext&, const BlobVec<T>& top,
                                     const std::vector<bool>& propagate_down, const BlobVec<T>& bottom) {
  if (propagate_down[0]) std::memcpy(bottom[0]->mutable_diff(), top[0]->diff(), top[0]->bytes());
}

template <typename T>
Shape ReshapeLayer<T>::top_shape(const Shape& bottom) const {
  const auto& p = this->param_.reshape_param();
  const int axes = static_cast<int>(bottom.size());
  // Caffe counts a negative axis from one past the end: -1 appends after the last axis.
  const int start = p.axis() >= 0 ? p.axis() : axes + p.axis() + 1;
  if (start < 0 || start > axes) this->fail(cat("reshape_param.axis ", p.axis(), " is outside the bottom's ", axes, " axes"));
  if (p.num_axes() < -1) this->fail(cat("reshape_param.num_axes must be >= -1, got ", p.num_axes()));
  const int end = p.num_axes() == -1 ? axes : start + p.num_axes();
  if (end > axes) this->fail(cat("reshape_param.num_axes ", p.num_axes(), " reaches past the bottom's ", axes, " axes"));
  Shape shape(bottom.begin(), bottom.begin() + start);
  int inferred = -1;
  for (int i = 0; i < p.shape().dim_size(); ++i) {
    const int64_t d = p.shape().dim(i);
    if (d == 0) {
      if (start + i >= axes) this->fail(cat("shape dim ", i, " is 0 (copy), but the bottom has no axis ", start + i));
      shape.push_back(bottom[start + i]);
    } else if (d == -1) {
      if (inferred >= 0) this->fail("gives -1 (infer) for two dimensions; at most one can be inferred");
      inferred = static_cast<int>(shape.size());
      shape.push_back(1);
    } else if (d < -1) {
      this->fail(cat("shape dim ", i, " is ", d, "; give a size, 0 (copy) or -1 (infer)"));
    } else {
      shape.push_back(d);
    }
  }
  shape.insert(shape.end(), bottom.begin() + end, bottom.end());
  if (inferred >= 0) {
    const int64_t known = count_of(shape);
    const int64_t total = count_of(bottom);
    if (known == 0 || total % known != 0)
      this->fail(cat("cannot infer the -1 dimension: ", total, " elements do not divide by ", known));
    shape[inferred] = total / known;
  }
  return shape;
}

template <typename T>
Shape FlattenLayer<T>::top_shape(const Shape& bottom) const {
  const auto& p = this->param_.flatten_param();
  const int start = layer_axis(*this, bottom, p.axis());
  const int end = layer_axis(*this, bottom, p.end_axis());
  if (end < start) this->fail(cat("flatten_param.end_axis ", p.end_axis(), " comes before axis ", p.axis()));
  Shape shape(bottom.begin(), bottom.begin() + start);
  shape.push_back(count_of(bottom, start, end + 1));
  shape.insert(shape.end(), bottom.begin() + end + 1, bottom.end());
  return shape;
}

template class ShapeOnlyLayer<float>;
template class ShapeOnlyLayer<double>;
template class ReshapeLayer<float>;
template class ReshapeLayer<double>;
template class FlattenLayer<float>;
template class FlattenLayer<double>;

}  // namespace cgdp
