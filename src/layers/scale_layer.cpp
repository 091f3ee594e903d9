// Scale layer: per-channel (or per-slice) multiply and optional bias with Caffe's defaults.
#include "cgdp/layers/scale_layer.hpp"

#include <algorithm>

#include "cgdp/layers/batch_norm_layer.hpp"
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
  channels_ = shape.size() > 1 ? shape[1] : 0;
  top[0]->reshape(shape);
  if (copies_input(bottom, top)) bottom_copy_.reshape(shape);
}

template <typename T>
void ScaleLayer<T>::run_inside(BatchNormLayer<T>& batch_norm) {
  batch_norm_ = &batch_norm;
  batch_norm.take_over_scale(*this->params_[0],
                             this->params_.size() > 1 ? this->params_[1].get() : nullptr);
}

// On CUDA only: on the CPU the ReLU's own vectorised pass costs less than the clamp inside
// BatchNorm's run loop, which must keep the ReLU's bits at -inf and does not vectorise.
template <typename T>
ReluAbsorption ScaleLayer<T>::absorb_relu() {
  if (!batch_norm_ || this->device_->kind() != DeviceKind::Cuda) return ReluAbsorption::kNone;
  batch_norm_->clamp_scaled_output();
  return ReluAbsorption::kForward;
}

template <typename T>
void ScaleLayer<T>::forward_cpu(const RunContext&, const BlobVec<T>& bottom,
                                const BlobVec<T>& top) {
  if (batch_norm_) return;  // the BatchNorm before it wrote the scaled values
  const T* x = bottom[0]->data();
  if (copies_input(bottom, top)) std::copy(x, x + bottom[0]->count(), bottom_copy_.mutable_data());
  const T* scale = this->params_[0]->data();
  const T* bias = this->params_.size() > 1 ? this->params_[1]->data() : nullptr;
  T* y = top[0]->mutable_data();
  for_each_element(runs(*bottom[0]),
                   [=](int64_t i, int64_t d) { y[i] = x[i] * scale[d] + (bias ? bias[d] : T(0)); });
}

template <typename T>
void ScaleLayer<T>::backward_cpu(const RunContext& ctx, const BlobVec<T>& top,
                                 const std::vector<bool>& propagate_down,
                                 const BlobVec<T>& bottom) {
  const T* dy = top[0]->diff();
  T* scale_diff = this->params_[0]->mutable_diff();
  T* bias_diff = this->params_.size() > 1 ? this->params_[1]->mutable_diff() : nullptr;
  if (batch_norm_)
    return batch_norm_->backward_through_scale(ctx, dy, scale_diff, bias_diff,
                                               bottom[0]->mutable_diff());
  const T* x = input_for_backward(bottom, top);
  constexpr int64_t kLanes = ChannelRuns::kMaxLanes;
  const ChannelRuns in = runs(*bottom[0]);
  // Parameter gradients first: in place, dx overwrites dy.
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < in.count(); ++r) {
    with_run_lanes(in, r, [&](auto lanes, auto lane_stride) {
      double ds[kLanes] = {}, db[kLanes] = {};
      for (int64_t o = 0; o < in.images; ++o) {
        const int64_t at = in.at(r, o);
        for (int64_t j = 0; j < in.spatial; ++j)
          for (int64_t l = 0; l < lanes; ++l) {
            const int64_t e = at + j * in.position_stride() + l * lane_stride;
            ds[l] += dy[e] * x[e];
            db[l] += dy[e];
          }
      }
      const int64_t first = in.first_channel(r);
      for (int64_t l = 0; l < lanes; ++l) {
        scale_diff[first + l] += static_cast<T>(ds[l]);
        if (bias_diff) bias_diff[first + l] += static_cast<T>(db[l]);
      }
    });
  }
  if (!propagate_down[0]) return;
  const T* scale = this->params_[0]->data();
  T* dx = bottom[0]->mutable_diff();
  for_each_element(in, [=](int64_t i, int64_t d) { dx[i] = dy[i] * scale[d]; });
}

template class ScaleLayer<float>;
template class ScaleLayer<double>;

}  // namespace cgdp
