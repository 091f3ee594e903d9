// EuclideanLoss, SigmoidCrossEntropyLoss, ContrastiveLoss and HingeLoss on the CPU, summed in
// double as Caffe's formulas state them.
#include "cgdp/layers/loss_layers.hpp"

#include <algorithm>
#include <cmath>

namespace cgdp {

namespace {

template <typename T>
std::unique_ptr<Blob<T>> scratch_like(Device& device, const Blob<T>& blob) {
  return std::make_unique<Blob<T>>(device, blob.shape(), Diff::None);
}

template <typename T>
void require_same_count(const Layer<T>& layer, const Blob<T>& a, const Blob<T>& b, const char* what) {
  if (a.count() != b.count())
    throw ModelError(cat("layer '", layer.name(), "' (", layer.type(), "): ", what, ": bottom 0 is ",
                         shape_string(a.shape()), ", bottom 1 ", shape_string(b.shape()), "; they must hold as many values"));
}

}  // namespace

// ------------------------------------------------------------------ EuclideanLoss

template <typename T>
void EuclideanLossLayer<T>::reshape(const BlobVec<T>& bottom, const BlobVec<T>& top) {
  require_same_count(*this, *bottom[0], *bottom[1], "the two inputs");
  if (bottom[0]->num_axes() == 0 || bottom[0]->shape(0) == 0) this->fail("needs a batch (a first dimension > 0)");
  diff_ = scratch_like(this->device(), *bottom[0]);
  top[0]->reshape({});
}

template <typename T>
void EuclideanLossLayer<T>::forward_cpu(const RunContext&, const BlobVec<T>& bottom, const BlobVec<T>& top) {
  const T* a = bottom[0]->data();
  const T* b = bottom[1]->data();
  T* d = diff_->mutable_data();
  double sum = 0;
  for (int64_t i = 0; i < bottom[0]->count(); ++i) {
    d[i] = a[i] - b[i];
    sum += static_cast<double>(d[i]) * d[i];
  }
  top[0]->mutable_data()[0] = static_cast<T>(sum / bottom[0]->shape(0) / 2);
}

template <typename T>
void EuclideanLossLayer<T>::backward_cpu(const RunContext&, const BlobVec<T>& top,
                                         const std::vector<bool>& propagate_down, const BlobVec<T>& bottom) {
  const T scale = top[0]->diff()[0] / static_cast<T>(bottom[0]->shape(0));
  for (int b = 0; b < 2; ++b) {
    if (!propagate_down[b]) continue;
    const T sign = b == 0 ? T(1) : T(-1);
    const T* d = diff_->data();
    T* dx = bottom[b]->mutable_diff();
    for (int64_t i = 0; i < diff_->count(); ++i) dx[i] = sign * scale * d[i];
  }
}

// ------------------------------------------------------------------ SigmoidCrossEntropyLoss

template <typename T>
SigmoidCrossEntropyLossLayer<T>::SigmoidCrossEntropyLossLayer(const proto::LayerParameter& param, Device& device)
    : LossLayer<T>(param, device) {
  const auto& p = param.loss_param();
  mode_ = p.normalization();
  if (!p.has_normalization() && p.has_normalize())
    mode_ = p.normalize() ? proto::LossParameter::VALID : proto::LossParameter::BATCH_SIZE;
  if (p.has_ignore_label()) ignore_label_ = p.ignore_label();
}

template <typename T>
void SigmoidCrossEntropyLossLayer<T>::reshape(const BlobVec<T>& bottom, const BlobVec<T>& top) {
  require_same_count(*this, *bottom[0], *bottom[1], "scores and targets");
  outer_ = bottom[0]->num_axes() > 0 ? bottom[0]->shape(0) : 1;
  top[0]->reshape({});
}

// Caffe's get_normalizer for this layer, at least 1.
template <typename T>
double sigmoid_ce_normalizer(typename SigmoidCrossEntropyLossLayer<T>::Mode mode, int64_t count, int64_t outer,
                             int64_t valid) {
  double n = 1;
  switch (mode) {
    case proto::LossParameter::FULL: n = static_cast<double>(count); break;
    case proto::LossParameter::VALID: n = static_cast<double>(valid); break;
    case proto::LossParameter::BATCH_SIZE: n = static_cast<double>(outer); break;
    case proto::LossParameter::NONE: n = 1; break;
  }
  return std::max(n, 1.0);
}

template <typename T>
void SigmoidCrossEntropyLossLayer<T>::forward_cpu(const RunContext&, const BlobVec<T>& bottom, const BlobVec<T>& top) {
  const T* x = bottom[0]->data();
  const T* t = bottom[1]->data();
  double loss = 0;
  int64_t valid = 0;
  for (int64_t i = 0; i < bottom[0]->count(); ++i) {
    if (ignore_label_ && t[i] == static_cast<T>(*ignore_label_)) continue;
    const double v = x[i], positive = v >= 0;
    loss -= v * (t[i] - positive) - std::log1p(std::exp(v - 2 * v * positive));
    ++valid;
  }
  top[0]->mutable_data()[0] = static_cast<T>(loss / sigmoid_ce_normalizer<T>(mode_, bottom[0]->count(), outer_, valid));
}

template <typename T>
void SigmoidCrossEntropyLossLayer<T>::backward_cpu(const RunContext&, const BlobVec<T>& top,
                                                   const std::vector<bool>& propagate_down, const BlobVec<T>& bottom) {
  if (!propagate_down[0]) return;
  const T* x = bottom[0]->data();
  const T* t = bottom[1]->data();
  T* dx = bottom[0]->mutable_diff();
  const int64_t n = bottom[0]->count();
  int64_t valid = 0;
  for (int64_t i = 0; i < n; ++i) valid += !(ignore_label_ && t[i] == static_cast<T>(*ignore_label_));
  const T scale = static_cast<T>(top[0]->diff()[0] / sigmoid_ce_normalizer<T>(mode_, n, outer_, valid));
  for (int64_t i = 0; i < n; ++i) {
    const bool ignored = ignore_label_ && t[i] == static_cast<T>(*ignore_label_);
    dx[i] = ignored ? T(0) : scale * (T(1) / (T(1) + std::exp(-x[i])) - t[i]);
  }
}

// ------------------------------------------------------------------ ContrastiveLoss

template <typename T>
void ContrastiveLossLayer<T>::reshape(const BlobVec<T>& bottom, const BlobVec<T>& top) {
  require_same_count(*this, *bottom[0], *bottom[1], "the two features");
  pairs_ = bottom[0]->num_axes() > 0 ? bottom[0]->shape(0) : 0;
  if (pairs_ == 0) this->fail("needs pairs (a first dimension > 0)");
  dim_ = bottom[0]->count() / pairs_;
  if (bottom[2]->count() != pairs_)
    this->fail(cat("bottom 2 (similarity) holds ", bottom[2]->count(), " values for ", pairs_, " pairs; give one per pair"));
  diff_ = scratch_like(this->device(), *bottom[0]);
  dist_sq_ = std::make_unique<Blob<T>>(this->device(), Shape{pairs_}, Diff::None);
  top[0]->reshape({});
}

template <typename T>
void ContrastiveLossLayer<T>::forward_cpu(const RunContext&, const BlobVec<T>& bottom, const BlobVec<T>& top) {
  const auto& p = this->param_.contrastive_loss_param();
  const T* a = bottom[0]->data();
  const T* b = bottom[1]->data();
  const T* y = bottom[2]->data();
  T* d = diff_->mutable_data();
  T* dist_sq = dist_sq_->mutable_data();
  const double margin = p.margin();
  double loss = 0;
  for (int64_t i = 0; i < pairs_; ++i) {
    double sq = 0;
    for (int64_t c = 0; c < dim_; ++c) {
      const int64_t k = i * dim_ + c;
      d[k] = a[k] - b[k];
      sq += static_cast<double>(d[k]) * d[k];
    }
    dist_sq[i] = static_cast<T>(sq);
    if (static_cast<int>(y[i])) {
      loss += sq;
    } else if (p.legacy_version()) {
      loss += std::max(margin - sq, 0.0);
    } else {
      const double gap = std::max(margin - std::sqrt(sq), 0.0);
      loss += gap * gap;
    }
  }
  top[0]->mutable_data()[0] = static_cast<T>(loss / static_cast<double>(pairs_) / 2);
}

template <typename T>
void ContrastiveLossLayer<T>::backward_cpu(const RunContext&, const BlobVec<T>& top,
                                           const std::vector<bool>& propagate_down, const BlobVec<T>& bottom) {
  const auto& p = this->param_.contrastive_loss_param();
  const T margin = p.margin();
  const T* y = bottom[2]->data();
  const T* d = diff_->data();
  const T* dist_sq = dist_sq_->data();
  for (int b = 0; b < 2; ++b) {
    if (!propagate_down[b]) continue;
    const T alpha = (b == 0 ? T(1) : T(-1)) * top[0]->diff()[0] / static_cast<T>(pairs_);
    T* dx = bottom[b]->mutable_diff();
    for (int64_t i = 0; i < pairs_; ++i) {
      // Caffe's factors: similar pairs pull together; dissimilar ones push apart inside the margin.
      T factor = 0;
      if (static_cast<int>(y[i])) {
        factor = alpha;
      } else if (p.legacy_version()) {
        factor = margin - dist_sq[i] > 0 ? -alpha : T(0);
      } else {
        const T dist = std::sqrt(dist_sq[i]);
        const T gap = margin - dist;
        factor = gap > 0 ? -alpha * gap / (dist + T(1e-4)) : T(0);
      }
      for (int64_t c = 0; c < dim_; ++c) dx[i * dim_ + c] = factor * d[i * dim_ + c];
    }
  }
}

// ------------------------------------------------------------------ HingeLoss

template <typename T>
void HingeLossLayer<T>::reshape(const BlobVec<T>& bottom, const BlobVec<T>& top) {
  ca_ = class_axis(*this, *bottom[0], 1, *bottom[1]);
  if (ca_.inner != 1)
    this->fail(cat("scores ", shape_string(bottom[0]->shape()), " must be N x K (one score per class per sample)"));
  margins_ = scratch_like(this->device(), *bottom[0]);
  top[0]->reshape({});
}

template <typename T>
void HingeLossLayer<T>::forward_cpu(const RunContext& ctx, const BlobVec<T>& bottom, const BlobVec<T>& top) {
  const T* x = bottom[0]->data();
  T* m = margins_->mutable_data();
  labels_.resize(static_cast<size_t>(ca_.outer));
  double loss = 0;
  const bool l2 = this->param_.hinge_loss_param().norm() == proto::HingeLossParameter::L2;
  for (int64_t i = 0; i < ca_.outer; ++i) {
    labels_[i] = class_label(*this, ca_, bottom[1]->data(), i, std::nullopt, ctx.sample_offset);
    for (int64_t k = 0; k < ca_.classes; ++k) {
      const int64_t j = i * ca_.classes + k;
      const T s = k == labels_[i] ? -x[j] : x[j];
      m[j] = std::max(T(0), T(1) + s);
      loss += l2 ? static_cast<double>(m[j]) * m[j] : m[j];
    }
  }
  top[0]->mutable_data()[0] = static_cast<T>(loss / static_cast<double>(ca_.outer));
}

template <typename T>
void HingeLossLayer<T>::backward_cpu(const RunContext&, const BlobVec<T>& top, const std::vector<bool>& propagate_down,
                                     const BlobVec<T>& bottom) {
  if (!propagate_down[0]) return;
  const bool l2 = this->param_.hinge_loss_param().norm() == proto::HingeLossParameter::L2;
  const T scale = top[0]->diff()[0] / static_cast<T>(ca_.outer);
  const T* m = margins_->data();
  T* dx = bottom[0]->mutable_diff();
  for (int64_t i = 0; i < ca_.outer; ++i)
    for (int64_t k = 0; k < ca_.classes; ++k) {
      const int64_t j = i * ca_.classes + k;
      const T sign = k == labels_[i] ? T(-1) : T(1);  // d s / d x
      const T slope = l2 ? T(2) * m[j] : T(m[j] > 0);
      dx[j] = scale * sign * slope;
    }
}

#define CGDP_INSTANTIATE_LOSS(L) \
  template class L<float>;       \
  template class L<double>;
CGDP_INSTANTIATE_LOSS(EuclideanLossLayer)
CGDP_INSTANTIATE_LOSS(SigmoidCrossEntropyLossLayer)
CGDP_INSTANTIATE_LOSS(ContrastiveLossLayer)
CGDP_INSTANTIATE_LOSS(HingeLossLayer)
#undef CGDP_INSTANTIATE_LOSS

}  // namespace cgdp
