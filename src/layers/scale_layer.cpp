// Scale layer: per-channel (or per-slice) multiply and optional bias with Caffe's defaults.
#include "cgdp/layers/scale_layer.hpp"

#include <algorithm>

#include "cgdp/layers/filler.hpp"
#include "cgdp/layers/layer_errors.hpp"

namespace cgdp {

template <typename T>
ScaleLayer<T>::ScaleLayer(const proto::LayerParameter& param, Device& device)
    : Layer<T>(param, device), bottom_copy_(device, Shape{}, Diff::None) {}

template <typename T>
void ScaleLayer<T>::layer_setup(const BlobVec<T>& bottom, const BlobVec<T>&, Rng& rng) {
  const auto& p = this->param_.scale_param();
  const Shape& shape = bottom[0]->shape();
  axis_ = layer_axis(*this, shape, p.axis());
  const int num_axes = p.num_axes();
  if (num_axes < -1) this->fail(cat("num_axes must be >= -1, got ", num_axes));
  const int end = num_axes == -1 ? static_cast<int>(shape.size()) : axis_ + num_axes;
  if (end > static_cast<int>(shape.size()))
    this->fail(cat("axis ", axis_, " + num_axes ", num_axes, " exceeds the ", shape.size(),
                   " axes of bottom shape ", shape_string(shape)));
  Blob<T>& scale = this->add_param(Shape(shape.begin() + axis_, shape.begin() + end));
  proto::FillerParameter filler = p.filler();
  if (!p.has_filler()) filler.set_value(1);  // Caffe: the scale starts at 1 unless told otherwise
  fill(scale, filler, rng);
  if (p.bias_term()) fill(this->add_param(scale.shape()), p.bias_filler(), rng);
}

template <typename T>
void ScaleLayer<T>::reshape(const BlobVec<T>& bottom, const BlobVec<T>& top) {
  const Shape& shape = bottom[0]->shape();
  const Shape& scale_shape = this->params_[0]->shape();
  const int end = axis_ + static_cast<int>(scale_shape.size());
  if (end > static_cast<int>(shape.size()) ||
      !std::equal(scale_shape.begin(), scale_shape.end(), shape.begin() + axis_))
    this->fail(cat("bottom shape ", shape_string(shape), " does not match scale shape ",
                   shape_string(scale_shape), " at axis ", axis_));
  outer_ = bottom[0]->count(0, axis_);
  scale_dim_ = this->params_[0]->count();
  inner_ = bottom[0]->count(end);
  top[0]->reshape(shape);
  if (copies_input(bottom, top)) bottom_copy_.reshape(shape);
}

template <typename T>
void ScaleLayer<T>::forward_cpu(const RunContext&, const BlobVec<T>& bottom,
                                const BlobVec<T>& top) {
  const T* x = bottom[0]->data();
  if (copies_input(bottom, top)) std::copy(x, x + bottom[0]->count(), bottom_copy_.mutable_data());
  const T* scale = this->params_[0]->data();
  const T* bias = this->params_.size() > 1 ? this->params_[1]->data() : nullptr;
  T* y = top[0]->mutable_data();
  const int64_t rows = outer_ * scale_dim_, inner = inner_;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t d = r % scale_dim_;
    const T b = bias ? bias[d] : T(0);
    for (int64_t i = r * inner; i < (r + 1) * inner; ++i) y[i] = x[i] * scale[d] + b;
  }
}

template <typename T>
void ScaleLayer<T>::backward_cpu(const RunContext&, const BlobVec<T>& top,
                                 const std::vector<bool>& propagate_down,
                                 const BlobVec<T>& bottom) {
  const T* dy = top[0]->diff();
  const T* x = input_for_backward(bottom, top);
  T* scale_diff = this->params_[0]->mutable_diff();
  T* bias_diff = this->params_.size() > 1 ? this->params_[1]->mutable_diff() : nullptr;
  const int64_t outer = outer_, dim = scale_dim_, inner = inner_;
  // Parameter gradients first: in place, dx overwrites dy.
#pragma omp parallel for schedule(static)
  for (int64_t d = 0; d < dim; ++d) {
    double ds = 0, db = 0;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = (o * dim + d) * inner; i < (o * dim + d + 1) * inner; ++i) {
        ds += dy[i] * x[i];
        db += dy[i];
      }
    scale_diff[d] += static_cast<T>(ds);
    if (bias_diff) bias_diff[d] += static_cast<T>(db);
  }
  if (!propagate_down[0]) return;
  const T* scale = this->params_[0]->data();
  T* dx = bottom[0]->mutable_diff();
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < outer * dim; ++r)
    for (int64_t i = r * inner; i < (r + 1) * inner; ++i) dx[i] = dy[i] * scale[r % dim];
}

template class ScaleLayer<float>;
template class ScaleLayer<double>;

}  // namespace cgdp
