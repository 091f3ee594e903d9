// Pooling on the CPU: planes (image, channel) are independent, so OpenMP splits over them.
#include "cgdp/layers/pooling_layer.hpp"

#include <algorithm>
#include <limits>
#include <span>

#include "cgdp/layers/spatial_param.hpp"

namespace cgdp {

namespace {

// The pooling proto has scalar fields: present or not.
std::span<const uint32_t> given(bool has, const uint32_t& value) {
  return has ? std::span<const uint32_t>(&value, 1) : std::span<const uint32_t>();
}

}  // namespace

template <typename T>
void PoolingLayer<T>::layer_setup(const BlobVec<T>&, const BlobVec<T>&, Rng&) {
  const auto& p = this->param_.pooling_param();
  max_ = p.pool() == proto::PoolingParameter::MAX;
  global_ = p.global_pooling();
  const uint32_t pad_value = p.pad(), stride_value = p.stride(), kernel_value = p.kernel_size();
  const SpatialPair pad = spatial_setting(given(p.has_pad(), pad_value), p.has_pad_h(), p.pad_h(),
                                          p.has_pad_w(), p.pad_w(), 0, "pad");
  const SpatialPair stride =
      spatial_setting(given(p.has_stride(), stride_value), p.has_stride_h(), p.stride_h(),
                      p.has_stride_w(), p.stride_w(), 1, "stride");
  pad_h_ = pad[0], pad_w_ = pad[1], stride_h_ = stride[0], stride_w_ = stride[1];
  const bool has_kernel = p.has_kernel_size() || p.has_kernel_h() || p.has_kernel_w();
  if (global_) {
    if (has_kernel) this->fail("global_pooling takes its kernel from the bottom; give no kernel");
    if (pad_h_ || pad_w_ || stride_h_ != 1 || stride_w_ != 1)
      this->fail("global_pooling needs pad = 0 and stride = 1");
    return;  // the kernel is the bottom's plane, known in reshape()
  }
  if (!has_kernel) this->fail("needs a kernel: kernel_size, or kernel_h and kernel_w");
  const SpatialPair kernel =
      spatial_setting(given(p.has_kernel_size(), kernel_value), p.has_kernel_h(), p.kernel_h(),
                      p.has_kernel_w(), p.kernel_w(), 0, "kernel_size");
  kernel_h_ = kernel[0], kernel_w_ = kernel[1];
  if (kernel_h_ <= 0 || kernel_w_ <= 0) this->fail("kernel size must be > 0");
  if (stride_h_ <= 0 || stride_w_ <= 0) this->fail("stride must be > 0");
  if (pad_h_ >= kernel_h_ || pad_w_ >= kernel_w_)
    this->fail(cat("pad ", pad_h_, "x", pad_w_, " must be smaller than the kernel ", kernel_h_, "x",
                   kernel_w_));
}

template <typename T>
void PoolingLayer<T>::reshape(const BlobVec<T>& bottom, const BlobVec<T>& top) {
  const Blob<T>& in = *bottom[0];
  if (in.num_axes() != 4)
    this->fail(cat("needs a 4-D bottom (N x C x H x W), got ", shape_string(in.shape())));
  height_ = in.shape(2), width_ = in.shape(3);
  if (global_) kernel_h_ = height_, kernel_w_ = width_;
  const int64_t padded_h = height_ + 2 * pad_h_, padded_w = width_ + 2 * pad_w_;
  if (kernel_h_ > padded_h || kernel_w_ > padded_w)
    this->fail(cat("kernel ", kernel_h_, "x", kernel_w_, " is larger than the padded input ",
                   padded_h, "x", padded_w));
  // Caffe rounds up, then drops a last window that would start inside the right/bottom padding.
  pooled_h_ = (padded_h - kernel_h_ + stride_h_ - 1) / stride_h_ + 1;
  pooled_w_ = (padded_w - kernel_w_ + stride_w_ - 1) / stride_w_ + 1;
  if (pad_h_ || pad_w_) {
    if ((pooled_h_ - 1) * stride_h_ >= height_ + pad_h_) --pooled_h_;
    if ((pooled_w_ - 1) * stride_w_ >= width_ + pad_w_) --pooled_w_;
  }
  top[0]->reshape({in.shape(0), in.shape(1), pooled_h_, pooled_w_});
  // The CUDA half keeps its argmax on the device (pooling_layer_cuda.cpp).
  if (max_ && this->device().kind() == DeviceKind::Cpu) argmax_.resize(static_cast<size_t>(top[0]->count()));
}

template <typename T>
typename PoolingLayer<T>::Window PoolingLayer<T>::window(int64_t ph, int64_t pw) const {
  const int64_t h0 = ph * stride_h_ - pad_h_, w0 = pw * stride_w_ - pad_w_;
  // AVE divides by the window clipped to the padded input, as Caffe does.
  const int64_t h1 = std::min(h0 + kernel_h_, height_ + pad_h_);
  const int64_t w1 = std::min(w0 + kernel_w_, width_ + pad_w_);
  return {std::max<int64_t>(h0, 0), std::min(h1, height_), std::max<int64_t>(w0, 0),
          std::min(w1, width_), (h1 - h0) * (w1 - w0)};
}

template <typename T>
void PoolingLayer<T>::max_plane(const T* in, T* out, int32_t* argmax) const {
  for (int64_t ph = 0; ph < pooled_h_; ++ph) {
    for (int64_t pw = 0; pw < pooled_w_; ++pw) {
      const Window w = window(ph, pw);
      T best = -std::numeric_limits<T>::max();
      int64_t at = -1;
      for (int64_t h = w.h0; h < w.h1; ++h)
        for (int64_t x = w.w0; x < w.w1; ++x)
          if (in[h * width_ + x] > best) best = in[h * width_ + x], at = h * width_ + x;
      out[ph * pooled_w_ + pw] = best;
      argmax[ph * pooled_w_ + pw] = static_cast<int32_t>(at);
    }
  }
}

template <typename T>
void PoolingLayer<T>::average_plane(const T* in, T* out) const {
  for (int64_t ph = 0; ph < pooled_h_; ++ph) {
    for (int64_t pw = 0; pw < pooled_w_; ++pw) {
      const Window w = window(ph, pw);
      T sum = 0;
      for (int64_t h = w.h0; h < w.h1; ++h)
        for (int64_t x = w.w0; x < w.w1; ++x) sum += in[h * width_ + x];
      out[ph * pooled_w_ + pw] = sum / static_cast<T>(w.divisor);
    }
  }
}

template <typename T>
void PoolingLayer<T>::forward_cpu(const RunContext&, const BlobVec<T>& bottom,
                                  const BlobVec<T>& top) {
  const int64_t planes = bottom[0]->count(0, 2);
  const int64_t in_plane = height_ * width_, out_plane = pooled_h_ * pooled_w_;
  const T* in = bottom[0]->data();
  T* out = top[0]->mutable_data();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < planes; ++i) {
    if (max_) {
      max_plane(in + i * in_plane, out + i * out_plane, argmax_.data() + i * out_plane);
    } else {
      average_plane(in + i * in_plane, out + i * out_plane);
    }
  }
}

template <typename T>
void PoolingLayer<T>::backward_cpu(const RunContext&, const BlobVec<T>& top,
                                   const std::vector<bool>& propagate_down,
                                   const BlobVec<T>& bottom) {
  if (!propagate_down[0]) return;
  const int64_t planes = bottom[0]->count(0, 2);
  const int64_t in_plane = height_ * width_, out_plane = pooled_h_ * pooled_w_;
  const T* out_diff = top[0]->diff();
  T* in_diff = bottom[0]->mutable_diff();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < planes; ++i) {
    T* dst = in_diff + i * in_plane;
    const T* src = out_diff + i * out_plane;
    std::fill(dst, dst + in_plane, T(0));
    if (max_) {
      const int32_t* argmax = argmax_.data() + i * out_plane;
      for (int64_t o = 0; o < out_plane; ++o)
        if (argmax[o] >= 0) dst[argmax[o]] += src[o];
      continue;
    }
    for (int64_t ph = 0; ph < pooled_h_; ++ph) {
      for (int64_t pw = 0; pw < pooled_w_; ++pw) {
        const Window w = window(ph, pw);
        const T share = src[ph * pooled_w_ + pw] / static_cast<T>(w.divisor);
        for (int64_t h = w.h0; h < w.h1; ++h)
          for (int64_t x = w.w0; x < w.w1; ++x) dst[h * width_ + x] += share;
      }
    }
  }
}

template class PoolingLayer<float>;
template class PoolingLayer<double>;

}  // namespace cgdp
