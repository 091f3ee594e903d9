// LRN on the CPU. Backward follows from top = x * scale^-beta:
//   dL/dx = dL/dtop * scale^-beta - 2 * alpha_over_n * beta * x * window_sum(dL/dtop * top / scale)
// (the neighbourhoods are symmetric, so the same window sum serves forward and backward). It
// computes top again from x and the kept scale, to the forward's bits: the net need not keep top.
// ACROSS_CHANNELS runs in tiles of one image's columns: a tile's channels stay in cache while
// each sum reads its neighbours, so memory sees each tensor once per pass (Caffe's nets: AlexNet,
// GoogLeNet). In a channel block (tensor/channel_blocks.hpp) its tiles are a few positions with
// all their channels instead, copied block by block, and the sums vectorise along the channels.
// Either way each element gets the same operations in the same order, so the layout changes no
// bit.
#include "cgdp/layers/lrn_layer.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "cgdp/core/error.hpp"
#include "cgdp/layers/lrn_column.hpp"
#include "cgdp/tensor/channel_blocks.hpp"

namespace cgdp {

namespace {

constexpr int64_t kTile = 256;  // columns per tile: 96 channels of them take 96 KiB in fp32
// Positions per tile in a channel block: each block holds them in one run (2 KiB in 16 fp32 lanes).
constexpr int64_t kPositions = 32;

// out[i] = a[i] * scale[i]^-beta, plus what out[i] held when kAdd (else out is only written: it
// may hold anything, NaN included). Caffe's nets take beta 0.75, where 1 / sqrt(s * sqrt(s))
// vectorises and std::pow does not.
template <bool kAdd, typename T>
void times_inverse_power(const T* scale, T beta, const T* a, T* out, int64_t count) {
  if (beta == T(0.75)) {
#pragma omp simd
    for (int64_t i = 0; i < count; ++i) {
      const T term = a[i] / std::sqrt(scale[i] * std::sqrt(scale[i]));
      out[i] = kAdd ? out[i] + term : term;
    }
    return;
  }
  for (int64_t i = 0; i < count; ++i) {
    const T term = a[i] * std::pow(scale[i], -beta);
    out[i] = kAdd ? out[i] + term : term;
  }
}

// A bf16 number's value: an element of the input's packed copy (Blob::packed_values).
inline float bf16_value(uint16_t bits) {
  return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}

template <typename T>
void widen_bf16(const uint16_t* bits, T* out, int64_t count) {
#pragma omp simd
  for (int64_t i = 0; i < count; ++i) out[i] = static_cast<T>(bf16_value(bits[i]));
}

// a * scale^-beta for one element, as times_inverse_power computes it.
template <typename T>
T times_inverse_power_of(T a, T scale, T beta) {
  return beta == T(0.75) ? a / std::sqrt(scale * std::sqrt(scale)) : a * std::pow(scale, -beta);
}

// sum[j] = the sum over channels [first, last] of tile[n * kTile + j], in channel order.
template <typename T>
void channel_window(const T* tile, int64_t first, int64_t last, int64_t width, T* sum) {
  std::fill(sum, sum + width, T(0));
  for (int64_t n = first; n <= last; ++n)
#pragma omp simd
    for (int64_t j = 0; j < width; ++j) sum[j] += tile[n * kTile + j];
}

// window[c] = the sum of padded[c .. c + size), one position's squares (or ratios) with size / 2
// zeros before and after its channels: in channel order from zero, as channel_window sums
// (adding the zeros changes no bit).
template <typename T>
void padded_window(const T* padded, int64_t channels, int64_t size, T* window) {
  std::fill(window, window + channels, T(0));
  for (int64_t n = 0; n < size; ++n)
#pragma omp simd
    for (int64_t c = 0; c < channels; ++c) window[c] += padded[c + n];
}

// Calls body(run, positions, window) for each tile of up to kPositions positions of an N x C x
// H x W tensor in channel block `block`, on OpenMP's threads. run(c0) is where the tile's run of
// channels c0 .. c0 + block begins (its positions one after another); window holds, for each
// position of the tile, the sums of `size` neighbouring channels of value(e), e being an
// element's offset.
template <typename T, typename Value, typename Body>
void for_each_position_tile(const Shape& shape, int64_t block, int64_t size, Value value,
                            Body body) {
  const int64_t channels = shape[1], plane = shape[2] * shape[3], half = (size - 1) / 2;
  const int64_t row = channels + 2 * half, tiles = (plane + kPositions - 1) / kPositions;
#pragma omp parallel
  {
    std::vector<T> padded(static_cast<size_t>(kPositions * row), T(0));
    std::vector<T> window(static_cast<size_t>(kPositions * channels));
#pragma omp for schedule(static)
    for (int64_t t = 0; t < shape[0] * tiles; ++t) {
      const int64_t p0 = t % tiles * kPositions, positions = std::min(kPositions, plane - p0);
      const int64_t image = t / tiles * channels * plane;
      const auto run = [&](int64_t c0) {
        return image + blocked_offset(block, 1, plane, c0, 0, p0);
      };
      for (int64_t c0 = 0; c0 < channels; c0 += block)
        for (int64_t r = 0; r < positions; ++r) {
          const int64_t at = run(c0) + r * block;
          T* values = padded.data() + r * row + half + c0;
#pragma omp simd
          for (int64_t b = 0; b < block; ++b) values[b] = value(at + b);
        }
      for (int64_t r = 0; r < positions; ++r)
        padded_window(padded.data() + r * row, channels, size, window.data() + r * channels);
      body(run, positions, window.data());
    }
  }
}

}  // namespace

template <typename T>
bool LRNLayer<T>::handles_channel_block(bool, int64_t block) const {
  return block == 1 || (this->device().kind() == DeviceKind::Cpu && across_channels_);
}

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
  // Forward only (a TEST net), ACROSS_CHANNELS computes each tile's scale where it uses it.
  scale_.reshape(this->forward_only_ && across_channels_ ? Shape{0} : shape_);
  work_.reshape(across_channels_ ? Shape{0} : shape_);
}

template <typename T>
bool LRNLayer<T>::cuda_runs_columns() const {
  return across_channels_ && this->param_.lrn_param().local_size() <= lrn::kMaxColumnWindow;
}

template <typename T>
int64_t LRNLayer<T>::kept_bytes(DeviceKind kind, bool backward) const {
  const int64_t bytes = count_of(shape_) * static_cast<int64_t>(sizeof(T));
  if (kind == DeviceKind::Cpu)
    return !across_channels_ ? 2 * bytes : this->forward_only_ ? 0 : bytes;
  if (cuda_runs_columns()) return 0;
  return backward ? 2 * bytes : bytes;
}

template <typename T>
void LRNLayer<T>::window_sum(const T* src, T* dst) const {
  const int64_t height = shape_[2], width = shape_[3];
  const int64_t planes = shape_[0] * shape_[1], plane = height * width, half = (size_ - 1) / 2;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < planes; ++i) {
    T* out = dst + i * plane;
    std::fill(out, out + plane, T(0));
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
void LRNLayer<T>::forward_across(const T* in, T* out) {
  const int64_t channels = shape_[1], plane = shape_[2] * shape_[3], half = (size_ - 1) / 2;
  const int64_t tiles = (plane + kTile - 1) / kTile;
#pragma omp parallel
  {
    std::vector<T> squares(static_cast<size_t>(channels * kTile));
    // Forward only: one row of the scale at a time, used where it is computed.
    std::vector<T> row(this->forward_only_ ? static_cast<size_t>(kTile) : 0);
#pragma omp for schedule(static)
    for (int64_t t = 0; t < shape_[0] * tiles; ++t) {
      const int64_t j0 = (t % tiles) * kTile, width = std::min(kTile, plane - j0);
      const int64_t base = (t / tiles) * channels * plane + j0;  // channel 0 of this tile
      for (int64_t c = 0; c < channels; ++c)
#pragma omp simd
        for (int64_t j = 0; j < width; ++j)
          squares[c * kTile + j] = in[base + c * plane + j] * in[base + c * plane + j];
      for (int64_t c = 0; c < channels; ++c) {
        T* scale = this->forward_only_ ? row.data() : scale_.mutable_data() + base + c * plane;
        channel_window(squares.data(), std::max<int64_t>(c - half, 0),
                       std::min(c + half, channels - 1), width, scale);
#pragma omp simd
        for (int64_t j = 0; j < width; ++j) scale[j] = k_ + alpha_over_n_ * scale[j];
        times_inverse_power<false>(scale, beta_, in + base + c * plane, out + base + c * plane,
                                   width);
      }
    }
  }
}

template <typename T>
void LRNLayer<T>::backward_across(const T* in, const uint16_t* packed, const T* out_diff,
                                  T* in_diff) const {
  const int64_t channels = shape_[1], plane = shape_[2] * shape_[3], half = (size_ - 1) / 2;
  const int64_t tiles = (plane + kTile - 1) / kTile;
  const T factor = -2 * alpha_over_n_ * beta_;
  const T* scale = scale_.data();
#pragma omp parallel
  {
    std::vector<T> ratios(static_cast<size_t>(channels * kTile));
    std::vector<T> out(static_cast<size_t>(kTile));  // one row of top, again
    std::vector<T> widened(packed ? static_cast<size_t>(channels * kTile) : 0);  // the tile's input
#pragma omp for schedule(static)
    for (int64_t t = 0; t < shape_[0] * tiles; ++t) {
      const int64_t j0 = (t % tiles) * kTile, width = std::min(kTile, plane - j0);
      const int64_t base = (t / tiles) * channels * plane + j0;
      if (packed)
        for (int64_t c = 0; c < channels; ++c)
          widen_bf16(packed + base + c * plane, widened.data() + c * kTile, width);
      const auto input = [&](int64_t c) {
        return packed ? widened.data() + c * kTile : in + base + c * plane;
      };
      for (int64_t c = 0; c < channels; ++c) {
        const int64_t at = base + c * plane;
        times_inverse_power<false>(scale + at, beta_, input(c), out.data(), width);
#pragma omp simd
        for (int64_t j = 0; j < width; ++j)
          ratios[c * kTile + j] = out_diff[at + j] * out[j] / scale[at + j];
      }
      // Each row of the gradient in `out` until it is whole: in_diff may be out_diff.
      for (int64_t c = 0; c < channels; ++c) {
        const int64_t at = base + c * plane;
        T* sum = out.data();  // the window's sum until the gradient replaces it
        channel_window(ratios.data(), std::max<int64_t>(c - half, 0),
                       std::min(c + half, channels - 1), width, sum);
        const T* x = input(c);
#pragma omp simd
        for (int64_t j = 0; j < width; ++j) sum[j] *= factor * x[j];
        times_inverse_power<true>(scale + at, beta_, out_diff + at, sum, width);
        std::copy(sum, sum + width, in_diff + at);
      }
    }
  }
}

template <typename T>
void LRNLayer<T>::forward_blocked(const T* in, T* out, int64_t block) {
  const int64_t channels = shape_[1];
  const auto square = [in](int64_t e) { return in[e] * in[e]; };
  const auto normalise = [&](auto run, int64_t positions, const T* window) {
    thread_local std::vector<T> kept_none;  // forward only: a run's scale, where it is used
    if (this->forward_only_) kept_none.resize(static_cast<size_t>(positions * block));
    for (int64_t c0 = 0; c0 < channels; c0 += block) {
      T* scale = this->forward_only_ ? kept_none.data() : scale_.mutable_data() + run(c0);
      for (int64_t r = 0; r < positions; ++r)
#pragma omp simd
        for (int64_t b = 0; b < block; ++b)
          scale[r * block + b] = k_ + alpha_over_n_ * window[r * channels + c0 + b];
      times_inverse_power<false>(scale, beta_, in + run(c0), out + run(c0), positions * block);
    }
  };
  for_each_position_tile<T>(shape_, block, size_, square, normalise);
}

template <typename T>
void LRNLayer<T>::backward_blocked(const T* in, const uint16_t* packed, const T* out_diff,
                                   T* in_diff, int64_t block) const {
  const int64_t channels = shape_[1];
  const T factor = -2 * alpha_over_n_ * beta_, beta = beta_;
  const T* scale = scale_.data();
  // x(e): the input's element e, from its values or its bf16 copy.
  const auto backward_reading = [&](auto x) {
    const auto ratio = [=](int64_t e) {
      return out_diff[e] * times_inverse_power_of(x(e), scale[e], beta) / scale[e];
    };
    // Each run of the gradient in `rows` until it is whole: in_diff may be out_diff.
    const auto gradient = [&](auto run, int64_t positions, const T* window) {
      thread_local std::vector<T> rows;
      rows.resize(static_cast<size_t>(kPositions * block));
      for (int64_t c0 = 0; c0 < channels; c0 += block) {
        const int64_t at = run(c0);
        for (int64_t r = 0; r < positions; ++r)
#pragma omp simd
          for (int64_t b = 0; b < block; ++b)
            rows[r * block + b] = window[r * channels + c0 + b] * (factor * x(at + r * block + b));
        times_inverse_power<true>(scale + at, beta_, out_diff + at, rows.data(), positions * block);
        std::copy(rows.begin(), rows.begin() + positions * block, in_diff + at);
      }
    };
    for_each_position_tile<T>(shape_, block, size_, ratio, gradient);
  };
  if (packed)
    backward_reading([packed](int64_t e) { return static_cast<T>(bf16_value(packed[e])); });
  else
    backward_reading([in](int64_t e) { return in[e]; });
}

template <typename T>
void LRNLayer<T>::forward_cpu(const RunContext&, const BlobVec<T>& bottom, const BlobVec<T>& top) {
  const T* in = bottom[0]->data();
  T* out = top[0]->mutable_data();
  const int64_t block = bottom[0]->channel_block();
  if (block > 1) return forward_blocked(in, out, block);
  if (across_channels_) return forward_across(in, out);
  const int64_t count = bottom[0]->count();
  T* squares = work_.mutable_data();
  T* scale = scale_.mutable_data();
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < count; ++i) squares[i] = in[i] * in[i];
  window_sum(squares, scale);
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < count; ++i) scale[i] = k_ + alpha_over_n_ * scale[i];
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < count; i += kTile) {
    times_inverse_power<false>(scale + i, beta_, in + i, out + i, std::min(kTile, count - i));
  }
}

template <typename T>
void LRNLayer<T>::backward_cpu(const RunContext&, const BlobVec<T>& top,
                               const std::vector<bool>& propagate_down, const BlobVec<T>& bottom) {
  if (!propagate_down[0]) return;
  const T* in = bottom[0]->data();
  const T* out_diff = top[0]->diff();
  T* in_diff = bottom[0]->mutable_diff();
  // The input's bf16 copy, when the net keeps only that (backward_reads_packed: across channels).
  const uint16_t* packed = bottom[0]->packed_values();
  const int64_t block = bottom[0]->channel_block();
  if (block > 1) return backward_blocked(in, packed, out_diff, in_diff, block);
  if (across_channels_) return backward_across(in, packed, out_diff, in_diff);
  CGDP_ASSERT(!packed && in_diff != out_diff);  // within channels: neither (gradient_in_place)
  const int64_t count = bottom[0]->count();
  T* ratios = work_.mutable_data();
  const T* scale = scale_.data();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < count; i += kTile) {  // top again, then the ratios, in place
    const int64_t width = std::min(kTile, count - i);
    times_inverse_power<false>(scale + i, beta_, in + i, ratios + i, width);
#pragma omp simd
    for (int64_t j = i; j < i + width; ++j) ratios[j] = out_diff[j] * ratios[j] / scale[j];
  }
  // in_diff holds the window sums until the last pass turns them into the gradient.
  window_sum(ratios, in_diff);
  const T factor = -2 * alpha_over_n_ * beta_;
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < count; ++i) in_diff[i] *= factor * in[i];
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < count; i += kTile) {
    times_inverse_power<true>(scale + i, beta_, out_diff + i, in_diff + i,
                              std::min(kTile, count - i));
  }
}

template class LRNLayer<float>;
template class LRNLayer<double>;

}  // namespace cgdp
