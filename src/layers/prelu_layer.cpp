// PReLU on the CPU: Caffe's forward and backward, the slopes' gradient summed in double.
#include "cgdp/layers/prelu_layer.hpp"

#include <algorithm>

#include "cgdp/layers/filler.hpp"

namespace cgdp {

template <typename T>
PReLULayer<T>::PReLULayer(const proto::LayerParameter& param, Device& device)
    : Layer<T>(param, device), bottom_copy_(device, Shape{}, Diff::None) {}

template <typename T>
void PReLULayer<T>::layer_setup(const BlobVec<T>& bottom, const BlobVec<T>&, Rng& rng) {
  if (bottom[0]->num_axes() < 2) this->fail(cat("needs a bottom with a channel axis, got ", shape_string(bottom[0]->shape())));
  const auto& p = this->param_.prelu_param();
  shared_ = p.channel_shared();
  proto::FillerParameter filler = p.filler();
  if (!p.has_filler()) filler.set_value(0.25f);  // Caffe's default slope
  fill(this->add_param({shared_ ? 1 : bottom[0]->shape(1)}), filler, rng);
}

template <typename T>
void PReLULayer<T>::reshape(const BlobVec<T>& bottom, const BlobVec<T>& top) {
  outer_ = bottom[0]->shape(0);
  channels_ = bottom[0]->shape(1);
  inner_ = bottom[0]->count(2);
  if (!shared_ && channels_ != this->params_[0]->count())
    this->fail(cat("bottom has ", channels_, " channels, its slopes ", this->params_[0]->count()));
  top[0]->reshape(bottom[0]->shape());
  if (top[0] == bottom[0] && !this->forward_only_) bottom_copy_.reshape(bottom[0]->shape());
}

template <typename T>
void PReLULayer<T>::forward_cpu(const RunContext&, const BlobVec<T>& bottom, const BlobVec<T>& top) {
  const T* x = bottom[0]->data();
  if (top[0] == bottom[0] && !this->forward_only_) std::copy(x, x + bottom[0]->count(), bottom_copy_.mutable_data());
  const T* a = this->params_[0]->data();
  T* y = top[0]->mutable_data();
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < outer_ * channels_; ++r) {
    const T slope = a[shared_ ? 0 : r % channels_];
    for (int64_t i = r * inner_; i < (r + 1) * inner_; ++i) y[i] = std::max(x[i], T(0)) + slope * std::min(x[i], T(0));
  }
}

template <typename T>
void PReLULayer<T>::backward_cpu(const RunContext&, const BlobVec<T>& top, const std::vector<bool>& propagate_down,
                                 const BlobVec<T>& bottom) {
  const T* x = top[0] == bottom[0] ? bottom_copy_.data() : bottom[0]->data();
  const T* dy = top[0]->diff();
  const T* a = this->params_[0]->data();
  T* da = this->params_[0]->mutable_diff();
  // The slopes' gradient first: in place, dx overwrites dy.
  const int64_t slopes = shared_ ? 1 : channels_;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < slopes; ++c) {
    double sum = 0;
    for (int64_t o = 0; o < outer_; ++o)
      for (int64_t k = shared_ ? 0 : c; k < (shared_ ? channels_ : c + 1); ++k)
        for (int64_t i = (o * channels_ + k) * inner_; i < (o * channels_ + k + 1) * inner_; ++i)
          if (x[i] <= 0) sum += dy[i] * x[i];
    da[c] += static_cast<T>(sum);
  }
  if (!propagate_down[0]) return;
  T* dx = bottom[0]->mutable_diff();
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < outer_ * channels_; ++r) {
    const T slope = a[shared_ ? 0 : r % channels_];
    for (int64_t i = r * inner_; i < (r + 1) * inner_; ++i) dx[i] = x[i] > 0 ? dy[i] : slope * dy[i];
  }
}

template class PReLULayer<float>;
template class PReLULayer<double>;

}  // namespace cgdp
