// LRN on the CPU. Backward follows from top = x * scale^-beta:
//   dL/dx = dL/dtop * scale^-beta - 2 * alpha_over_n * beta * x * window_sum(dL/dtop * top / scale)
// (the neighbourhoods are symmetric, so the same window sum serves forward and backward).
#include "cgdp/layers/lrn_layer.hpp"

#include <algorithm>
#include <cmath>

namespace cgdp {

template <typename T>
void LRNLayer<T>::layer_setup(const BlobVec<T>&, const BlobVec<T>&, Rng&) {
  const auto& p = this->param_.lrn_param();
  size_ = p.local_size();
  if (size_ <= 0 || size_ % 2 == 0) this->fail(cat("local_size must be odd and > 0, got ", size_));
  across_channels_ = p.norm_region() == proto::LRNParameter::ACROSS_CHANNELS;
  const int64_t neighbours = across_channels_ ? size_ : size_ * size_;
  alpha_over_n_ = static_cast<T>(p.alpha()) / static_cast<T>(neighbours);
  beta_ = static_cast<T>(p.beta());
  k_ = across_channels_ ? static_cast<T>(p.k()) : T(1);
}

template <typename T>
void LRNLayer<T>::reshape(const BlobVec<T>& bottom, const BlobVec<T>& top) {
  if (bottom[0]->num_axes() != 4)
    this->fail(cat("needs a 4-D bottom (N x C x H x W), got ", shape_string(bottom[0]->shape())));
  shape_ = bottom[0]->shape();
  top[0]->reshape(shape_);
  if (this->device().kind() != DeviceKind::Cpu) return;  // the CUDA half keeps its own scratch
  scale_.resize(static_cast<size_t>(bottom[0]->count()));
  work_.resize(scale_.size());
}

template <typename T>
void LRNLayer<T>::window_sum(const T* src, T* dst) const {
  const int64_t channels = shape_[1], height = shape_[2], width = shape_[3];
  const int64_t planes = shape_[0] * channels, plane = height * width, half = (size_ - 1) / 2;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < planes; ++i) {
    T* out = dst + i * plane;
    std::fill(out, out + plane, T(0));
    if (across_channels_) {
      const int64_t c = i % channels;
      const T* first = src + (i - c) * plane;  // channel 0 of this image
      for (int64_t n = std::max<int64_t>(c - half, 0); n <= std::min(c + half, channels - 1); ++n)
        for (int64_t j = 0; j < plane; ++j) out[j] += first[n * plane + j];
      continue;
    }
    // A square window is a row window followed by a column window.
    const T* in = src + i * plane;
    std::vector<T> rows(static_cast<size_t>(plane), T(0));
    for (int64_t h = 0; h < height; ++h)
      for (int64_t w = 0; w < width; ++w)
        for (int64_t x = std::max<int64_t>(w - half, 0); x <= std::min(w + half, width - 1); ++x)
          rows[h * width + w] += in[h * width + x];
    for (int64_t h = 0; h < height; ++h)
      for (int64_t y = std::max<int64_t>(h - half, 0); y <= std::min(h + half, height - 1); ++y)
        for (int64_t w = 0; w < width; ++w) out[h * width + w] += rows[y * width + w];
  }
}

template <typename T>
void LRNLayer<T>::forward_cpu(const RunContext&, const BlobVec<T>& bottom, const BlobVec<T>& top) {
  const int64_t count = bottom[0]->count();
  const T* in = bottom[0]->data();
  T* out = top[0]->mutable_data();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < count; ++i) work_[i] = in[i] * in[i];
  window_sum(work_.data(), scale_.data());
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < count; ++i) {
    scale_[i] = k_ + alpha_over_n_ * scale_[i];
    out[i] = in[i] * std::pow(scale_[i], -beta_);
  }
}

template <typename T>
void LRNLayer<T>::backward_cpu(const RunContext&, const BlobVec<T>& top,
                               const std::vector<bool>& propagate_down, const BlobVec<T>& bottom) {
  if (!propagate_down[0]) return;
  const int64_t count = bottom[0]->count();
  const T* in = bottom[0]->data();
  const T* out = top[0]->data();
  const T* out_diff = top[0]->diff();
  T* in_diff = bottom[0]->mutable_diff();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < count; ++i) work_[i] = out_diff[i] * out[i] / scale_[i];
  // in_diff holds the window sums until the last pass turns them into the gradient.
  window_sum(work_.data(), in_diff);
  const T factor = 2 * alpha_over_n_ * beta_;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < count; ++i)
    in_diff[i] = out_diff[i] * std::pow(scale_[i], -beta_) - factor * in[i] * in_diff[i];
}

template class LRNLayer<float>;
template class LRNLayer<double>;

}  // namespace cgdp
