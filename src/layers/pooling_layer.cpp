// Pooling on the CPU: planes (image, channel) are independent, so OpenMP splits over them.
#include "cgdp/layers/pooling_layer.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <span>
#include <type_traits>
#include <utility>

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
  channels_ = in.shape(1), height_ = in.shape(2), width_ = in.shape(3);
  if (global_) kernel_h_ = height_, kernel_w_ = width_;
  const int64_t padded_h = height_ + 2 * pad_h_, padded_w = width_ + 2 * pad_w_;
  if (kernel_h_ > padded_h || kernel_w_ > padded_w)
    this->fail(cat("kernel ", kernel_h_, "x", kernel_w_, " is larger than the padded input ",
                   padded_h, "x", padded_w));
  // Caffe rounds up (round_mode CEIL, its default) or down, then drops a last window that would
  // start inside the right/bottom padding.
  const int64_t up = this->param_.pooling_param().round_mode() == proto::PoolingParameter::CEIL;
  pooled_h_ = (padded_h - kernel_h_ + up * (stride_h_ - 1)) / stride_h_ + 1;
  pooled_w_ = (padded_w - kernel_w_ + up * (stride_w_ - 1)) / stride_w_ + 1;
  if (pad_h_ || pad_w_) {
    if ((pooled_h_ - 1) * stride_h_ >= height_ + pad_h_) --pooled_h_;
    if ((pooled_w_ - 1) * stride_w_ >= width_ + pad_w_) --pooled_w_;
  }
  top[0]->reshape({in.shape(0), in.shape(1), pooled_h_, pooled_w_});
  code_bytes_ = pool::code_bytes(kernel_h_ * kernel_w_);
  const auto words = [&](int64_t count) {  // elements of T holding `count` codes
    return (count * code_bytes_ + static_cast<int64_t>(sizeof(T)) - 1) /
           static_cast<int64_t>(sizeof(T));
  };
  if (max_ && !this->forward_only_) argmax_.reshape({words(top[0]->count())});
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

namespace {

// Max and its index over rows [h0, h1) x columns [w0, w1); the first maximum wins, as in Caffe.
// Selects, not branches: which input wins is data-dependent and would mispredict half the time.
template <typename T>
void window_max(const T* in, int64_t width, int64_t h0, int64_t h1, int64_t w0, int64_t w1, T* out,
                int32_t* argmax) {
  T best = -std::numeric_limits<T>::max();
  int64_t at = -1;
  for (int64_t h = h0; h < h1; ++h)
    for (int64_t x = w0; x < w1; ++x) {
      const int64_t i = h * width + x;
      const bool better = in[i] > best;
      best = better ? in[i] : best;
      at = better ? i : at;
    }
  *out = best;
  *argmax = static_cast<int32_t>(at);
}

// N floats (and int32s) in one vector register: GCC/Clang vector extensions, so the code stays
// portable; N = 8 is one AVX2 register.
template <int N>
struct Lanes {
  typedef float Floats __attribute__((vector_size(4 * N)));
  typedef int32_t Ints __attribute__((vector_size(4 * N)));
};

template <int N, size_t... I>
typename Lanes<N>::Floats take_every_other(typename Lanes<N>::Floats lo,
                                           typename Lanes<N>::Floats hi, int first,
                                           std::index_sequence<I...>) {
  // Indices count on into hi: lane k of (lo, hi) is element k of 2N consecutive floats.
  return first == 0 ? __builtin_shufflevector(lo, hi, (2 * I)...)
                    : __builtin_shufflevector(lo, hi, (2 * I + 1)...);
}

// N neighbouring outputs of a 2x2, stride-2 grid whose windows start at column 2 * pw0 of rows
// h and h + 1: window_max's selects, candidate by candidate, on all N at once.
template <int N>
void max_2x2_run(const float* in, int64_t width, int64_t h, int64_t pw0, float* out,
                 int32_t* argmax) {
  using Floats = typename Lanes<N>::Floats;
  using Ints = typename Lanes<N>::Ints;
  constexpr auto lanes = std::make_index_sequence<N>();
  Floats best = Floats{} - std::numeric_limits<float>::max();
  Ints at = Ints{} - 1, twice_lane;
  for (int i = 0; i < N; ++i) twice_lane[i] = 2 * i;
  for (int dy = 0; dy < 2; ++dy) {
    const int64_t first = (h + dy) * width + 2 * pw0;
    Floats lo, hi;
    std::memcpy(&lo, in + first, sizeof lo);
    std::memcpy(&hi, in + first + N, sizeof hi);
    for (int dx = 0; dx < 2; ++dx) {
      const Floats candidate = take_every_other<N>(lo, hi, dx, lanes);
      const Ints better = candidate > best;
      best = better ? candidate : best;
      at = better ? twice_lane + static_cast<int32_t>(first + dx) : at;
    }
  }
  std::memcpy(out + pw0, &best, sizeof best);
  std::memcpy(argmax + pw0, &at, sizeof at);
}

// Outputs [0, count) of one row, N at a time (count >= N); the last run overlaps the one before
// it instead of leaving a scalar tail (recomputing an output gives the same value).
template <int N>
void max_2x2_row(const float* in, int64_t width, int64_t h, int64_t count, float* out,
                 int32_t* argmax) {
  for (int64_t pw0 = 0;; pw0 += N) {
    const int64_t start = std::min(pw0, count - N);
    max_2x2_run<N>(in, width, h, start, out, argmax);
    if (start + N >= count) return;
  }
}

// Elements 0, 2, ..., 2N - 2 of 2N - 1 consecutive floats, the first N in lo and the last N in hi
// (which starts one element before lo's end).
template <int N, size_t... I>
typename Lanes<N>::Floats evens_of_lo_and_shifted_hi(typename Lanes<N>::Floats lo,
                                                     typename Lanes<N>::Floats hi,
                                                     std::index_sequence<I...>) {
  return __builtin_shufflevector(lo, hi, (I < N / 2 ? 2 * I : 2 * I + 1)...);
}

// N neighbouring outputs of one row whose kh x kw windows lie inside the input, the first at
// column w0 of row h0, the next kStride columns on: window_max's selects, candidate by
// candidate, on all N at once.
template <int N, int kStride>
void max_inside_run(const float* in, int64_t width, int64_t h0, int64_t w0, int64_t kh, int64_t kw,
                    float* out, int32_t* argmax) {
  using Floats = typename Lanes<N>::Floats;
  using Ints = typename Lanes<N>::Ints;
  Floats best = Floats{} - std::numeric_limits<float>::max();
  Ints at = Ints{} - 1, lane_step;
  for (int i = 0; i < N; ++i) lane_step[i] = kStride * i;
  for (int64_t dy = 0; dy < kh; ++dy)
    for (int64_t dx = 0; dx < kw; ++dx) {
      const int64_t first = (h0 + dy) * width + w0 + dx;
      Floats candidate;
      if constexpr (kStride == 1) {
        std::memcpy(&candidate, in + first, sizeof candidate);
      } else {
        // The last lane's element is first + 2N - 2: hi ends there, not to read past the input.
        Floats lo, hi;
        std::memcpy(&lo, in + first, sizeof lo);
        std::memcpy(&hi, in + first + N - 1, sizeof hi);
        candidate = evens_of_lo_and_shifted_hi<N>(lo, hi, std::make_index_sequence<N>());
      }
      const Ints better = candidate > best;
      best = better ? candidate : best;
      at = better ? lane_step + static_cast<int32_t>(first) : at;
    }
  std::memcpy(out, &best, sizeof best);
  std::memcpy(argmax, &at, sizeof at);
}

// Outputs [lo, hi) of row ph, all inside the input, N at a time (hi - lo >= N); the last run
// overlaps the one before it instead of leaving a scalar tail.
template <int N, int kStride>
void max_inside_row(const float* in, int64_t width, int64_t h0, int64_t pad_w, int64_t kh,
                    int64_t kw, int64_t lo, int64_t hi, float* out, int32_t* argmax) {
  for (int64_t pw0 = lo;; pw0 += N) {
    const int64_t start = std::min(pw0, hi - N);
    max_inside_run<N, kStride>(in, width, h0, start * kStride - pad_w, kh, kw, out + start,
                               argmax + start);
    if (start + N >= hi) return;
  }
}

}  // namespace

template <typename T>
bool PoolingLayer<T>::max_inside_rows(const T* in, T* out, int32_t* argmax) const {
  constexpr int kN = 8;  // one AVX2 register of floats
  // Outputs whose windows need no clipping: columns [lo, hi), and rows alike.
  const auto inside = [](int64_t size, int64_t pad, int64_t kernel, int64_t stride,
                         int64_t pooled) {
    const int64_t lo = (pad + stride - 1) / stride;
    const int64_t hi =
        size + pad >= kernel ? std::min((size + pad - kernel) / stride + 1, pooled) : 0;
    return std::pair{lo, std::max(lo, hi)};
  };
  const auto [lo, hi] = inside(width_, pad_w_, kernel_w_, stride_w_, pooled_w_);
  if (!std::is_same_v<T, float> || (stride_w_ != 1 && stride_w_ != 2) || hi - lo < kN) return false;
  const auto [row_lo, row_hi] = inside(height_, pad_h_, kernel_h_, stride_h_, pooled_h_);
  for (int64_t ph = 0; ph < pooled_h_; ++ph) {
    T* out_row = out + ph * pooled_w_;
    int32_t* argmax_row = argmax + ph * pooled_w_;
    const bool row_inside = ph >= row_lo && ph < row_hi;
    if constexpr (std::is_same_v<T, float>) {
      if (row_inside) {
        const int64_t h0 = ph * stride_h_ - pad_h_;
        if (stride_w_ == 1)
          max_inside_row<kN, 1>(in, width_, h0, pad_w_, kernel_h_, kernel_w_, lo, hi, out_row,
                                argmax_row);
        else
          max_inside_row<kN, 2>(in, width_, h0, pad_w_, kernel_h_, kernel_w_, lo, hi, out_row,
                                argmax_row);
      }
    }
    for (int64_t pw = 0; pw < pooled_w_; ++pw) {
      if (row_inside && pw == lo) pw = hi;
      if (pw == pooled_w_) break;
      const Window w = window(ph, pw);
      window_max(in, width_, w.h0, w.h1, w.w0, w.w1, out_row + pw, argmax_row + pw);
    }
  }
  return true;
}

template <typename T>
bool PoolingLayer<T>::max_2x2_plane(const T* in, T* out, int32_t* argmax) const {
  const bool grid = kernel_h_ == 2 && kernel_w_ == 2 && stride_h_ == 2 && stride_w_ == 2 &&
                    pad_h_ == 0 && pad_w_ == 0;
  // With an odd height or width, Caffe's rounding up adds a clipped last row or column.
  const int64_t full_h = height_ / 2, full_w = width_ / 2;
  if (!std::is_same_v<T, float> || !grid || full_w < 4) return false;
  for (int64_t ph = 0; ph < pooled_h_; ++ph) {
    T* out_row = out + ph * pooled_w_;
    int32_t* argmax_row = argmax + ph * pooled_w_;
    if constexpr (std::is_same_v<T, float>) {
      if (ph < full_h && full_w >= 8) {
        max_2x2_row<8>(in, width_, 2 * ph, full_w, out_row, argmax_row);
      } else if (ph < full_h) {
        max_2x2_row<4>(in, width_, 2 * ph, full_w, out_row, argmax_row);
      }
    }
    for (int64_t pw = ph < full_h ? full_w : 0; pw < pooled_w_; ++pw) {
      const Window w = window(ph, pw);
      window_max(in, width_, w.h0, w.h1, w.w0, w.w1, out_row + pw, argmax_row + pw);
    }
  }
  return true;
}

template <typename T>
void PoolingLayer<T>::max_plane(const T* in, T* out, int32_t* argmax) const {
  if (max_2x2_plane(in, out, argmax) || max_inside_rows(in, out, argmax)) return;
  for (int64_t ph = 0; ph < pooled_h_; ++ph)
    for (int64_t pw = 0; pw < pooled_w_; ++pw) {
      const Window w = window(ph, pw);
      const int64_t o = ph * pooled_w_ + pw;
      window_max(in, width_, w.h0, w.h1, w.w0, w.w1, out + o, argmax + o);
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
  if (bottom[0]->channel_block() > 1 || top[0]->channel_block() > 1)
    return forward_blocked(*bottom[0], *top[0]);
  const int64_t planes = bottom[0]->count(0, 2);
  const int64_t in_plane = height_ * width_, out_plane = pooled_h_ * pooled_w_;
  const T* in = bottom[0]->data();
  T* out = top[0]->mutable_data();
#pragma omp parallel
  {
    // A plane's maxima's positions, coded for backward unless forward only (a TEST net).
    std::vector<int32_t> positions(max_ ? static_cast<size_t>(out_plane) : 0);
#pragma omp for schedule(static)
    for (int64_t i = 0; i < planes; ++i) {
      if (!max_) {
        average_plane(in + i * in_plane, out + i * out_plane);
        continue;
      }
      max_plane(in + i * in_plane, out + i * out_plane, positions.data());
      if (!this->forward_only_)
        with_code([&]<typename Code>() {
          encode_plane(positions.data(), static_cast<Code*>(codes()) + i * out_plane);
        });
    }
  }
}

template <typename T>
void PoolingLayer<T>::backward_cpu(const RunContext&, const BlobVec<T>& top,
                                   const std::vector<bool>& propagate_down,
                                   const BlobVec<T>& bottom) {
  if (!propagate_down[0]) return;
  if (bottom[0]->channel_block() > 1 || top[0]->channel_block() > 1)
    return backward_blocked(*top[0], *bottom[0]);
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
      const pool::CodeGeometry g = code_geometry();
      with_code([&]<typename Code>() {
        const Code* code = static_cast<const Code*>(codes()) + i * out_plane;
        for (int64_t ph = 0; ph < pooled_h_; ++ph)
          for (int64_t pw = 0; pw < pooled_w_; ++pw) {
            const int64_t o = ph * pooled_w_ + pw, at = pool::decode(code[o], ph, pw, g);
            if (at >= 0) dst[at] += src[o];
          }
      });
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
