// SoftmaxWithLoss layer: fused softmax + multinomial logistic loss, Caffe's normalisation rules.
#include "cgdp/layers/softmax_with_loss_layer.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace cgdp {

template <typename T>
SoftmaxWithLossLayer<T>::SoftmaxWithLossLayer(const proto::LayerParameter& param, Device& device)
    : Layer<T>(param, device), softmax_(param, device), prob_(device, Shape{}, Diff::None) {}

template <typename T>
void SoftmaxWithLossLayer<T>::layer_setup(const BlobVec<T>& bottom, const BlobVec<T>&, Rng& rng) {
  const auto& p = this->param_.loss_param();
  mode_ = p.normalization();
  if (!p.has_normalization() && p.has_normalize())
    mode_ = p.normalize() ? proto::LossParameter::VALID : proto::LossParameter::BATCH_SIZE;
  if (p.has_ignore_label()) ignore_label_ = p.ignore_label();
  softmax_.setup({bottom[0]}, {&prob_}, rng);
}

template <typename T>
void SoftmaxWithLossLayer<T>::reshape(const BlobVec<T>& bottom, const BlobVec<T>& top) {
  softmax_.reshape({bottom[0]}, {&prob_});
  ca_ = class_axis(*this, *bottom[0], this->param_.softmax_param().axis(), *bottom[1]);
  labels_.resize(ca_.outer * ca_.inner);
  top[0]->reshape({});
  if (top.size() > 1) top[1]->reshape_like(*bottom[0]);
}

template <typename T>
double SoftmaxWithLossLayer<T>::normalizer(int64_t valid_count) const {
  double n = 1;
  switch (mode_) {
    case proto::LossParameter::FULL:
      n = static_cast<double>(ca_.outer * ca_.inner);
      break;
    case proto::LossParameter::VALID:
      n = static_cast<double>(valid_count);
      break;
    case proto::LossParameter::BATCH_SIZE:
      n = static_cast<double>(ca_.outer);
      break;
    case proto::LossParameter::NONE:
      n = 1;
      break;
  }
  return std::max(1.0, n);  // all-ignored batches give a zero loss, not NaN
}

template <typename T>
void SoftmaxWithLossLayer<T>::forward_cpu(const RunContext& ctx, const BlobVec<T>& bottom,
                                          const BlobVec<T>& top) {
  softmax_.forward(ctx, {bottom[0]}, {&prob_});
  const T* prob = prob_.data();
  const T* label = bottom[1]->data();
  const int64_t classes = ca_.classes, inner = ca_.inner;
  double loss = 0;
  valid_count_ = 0;
  for (int64_t pos = 0; pos < ca_.outer * inner; ++pos) {
    const int64_t l = class_label(*this, ca_, label, pos, ignore_label_, ctx.sample_offset);
    labels_[pos] = l;
    if (l < 0) continue;
    const T p = prob[(pos / inner * classes + l) * inner + pos % inner];
    loss -= std::log(std::max<double>(p, std::numeric_limits<float>::min()));
    ++valid_count_;
  }
  top[0]->mutable_data()[0] = static_cast<T>(loss / normalizer(valid_count_));
  if (top.size() > 1) std::copy(prob, prob + prob_.count(), top[1]->mutable_data());
}

template <typename T>
void SoftmaxWithLossLayer<T>::backward_cpu(const RunContext&, const BlobVec<T>& top,
                                           const std::vector<bool>& propagate_down,
                                           const BlobVec<T>& bottom) {
  if (propagate_down[1]) this->fail("cannot backpropagate to the labels (bottom 1)");
  if (!propagate_down[0]) return;
  // d loss / d x = (prob - onehot(label)) * loss_weight / normalizer; zero where ignored.
  const T scale = static_cast<T>(top[0]->diff()[0] / normalizer(valid_count_));
  const T* prob = prob_.data();
  T* dx = bottom[0]->mutable_diff();
  const int64_t classes = ca_.classes, inner = ca_.inner;
#pragma omp parallel for schedule(static)
  for (int64_t pos = 0; pos < ca_.outer * inner; ++pos) {
    const int64_t l = labels_[pos];
    const int64_t base = pos / inner * classes * inner + pos % inner;
    for (int64_t c = 0; c < classes; ++c) {
      const T g = l < 0 ? T(0) : prob[base + c * inner] - (c == l ? T(1) : T(0));
      dx[base + c * inner] = g * scale;
    }
  }
}

template class SoftmaxWithLossLayer<float>;
template class SoftmaxWithLossLayer<double>;

}  // namespace cgdp
