// Pooling with a channel-blocked bottom or top (tensor/channel_blocks.hpp): between oneDNN's
// convolutions, which run fastest in such layouts, and Caffe's NCHW layers, so that the pooling's
// own pass over the data does the transposition. Images go side by side over OpenMP; within an
// image a few channels at a time are pooled into a tile, then stored along the top's memory.
// Each output and each gradient element comes from the same inputs in the same order as on the
// plain path (pooling_layer.cpp), so the layout changes no bit.
#include <algorithm>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "cgdp/layers/pooling_layer.hpp"
#include "cgdp/tensor/channel_blocks.hpp"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace cgdp {

namespace {

constexpr int kMaxLanes = 16;  // one AVX-512 register of floats

// Where each channel's first element lies in an image of `block`-blocked planes of `plane`
// positions; position p of channel c is then at base[c] + p * block.
std::vector<int64_t> channel_bases(int64_t channels, int64_t block, int64_t plane) {
  std::vector<int64_t> base(static_cast<size_t>(channels));
  for (int64_t c = 0; c < channels; ++c) base[c] = blocked_offset(block, 1, plane, c, 0, 0);
  return base;
}

// 8 neighbouring channels' max over rows [h0, h1) x columns [w0, w1) of an image whose channel
// `first` starts at in + first, and each one's code (pool_window_code.hpp: its place from the
// unclipped window's corner (corner_h, corner_w); -1 if none): window_max's selects on all 8 at
// once (GCC/Clang vector extensions, one AVX2 register).
void window_max_8(const float* in, int64_t first, int64_t block, int64_t width, int64_t h0,
                  int64_t h1, int64_t w0, int64_t w1, int64_t corner_h, int64_t corner_w,
                  int64_t kernel_w, float* out, int32_t* code) {
  typedef float Floats __attribute__((vector_size(32)));
  typedef int32_t Ints __attribute__((vector_size(32)));
  Floats best = Floats{} - std::numeric_limits<float>::max();
  Ints at = Ints{} - 1;
  for (int64_t h = h0; h < h1; ++h)
    for (int64_t x = w0; x < w1; ++x) {
      Floats candidate;
      std::memcpy(&candidate, in + first + (h * width + x) * block, sizeof candidate);
      const Ints better = candidate > best;
      best = better ? candidate : best;
      at = better ? Ints{} + static_cast<int32_t>((h - corner_h) * kernel_w + x - corner_w) : at;
    }
  std::memcpy(out, &best, sizeof best);
  std::memcpy(code, &at, sizeof at);
}

}  // namespace

template <typename T>
bool PoolingLayer<T>::handles_channel_block(bool, int64_t block) const {
  return block == 1 ||
         (this->device().kind() == DeviceKind::Cpu && block > 0 && channels_ % block == 0);
}

template <typename T>
void PoolingLayer<T>::forward_blocked(const Blob<T>& bottom, Blob<T>& top) {
  const int64_t images = bottom.shape(0), in_block = bottom.channel_block();
  const int64_t out_block = top.channel_block();
  const int64_t in_image = bottom.count(1), out_image = top.count(1);
  const int64_t plane = pooled_h_ * pooled_w_;
  const std::vector<int64_t> in_base = channel_bases(channels_, in_block, height_ * width_);
  const std::vector<int64_t> out_base = channel_bases(channels_, out_block, plane);
  int threads = 1;
#ifdef _OPENMP
  threads = omp_get_max_threads();
#endif
  tiles_.resize(static_cast<size_t>(threads * kMaxLanes * plane));
  tile_codes_.resize(tiles_.size());
  // A plain bottom's maxima's positions per thread, coded for backward unless forward only.
  const bool plain_positions = max_ && in_block == 1;
  positions_.resize(plain_positions ? static_cast<size_t>(threads * out_image) : 0);
  // Lanes: channels that are neighbours in the blocked side's memory.
  const int64_t block = in_block > 1 ? in_block : out_block;
  const int lanes = block % 16 == 0 ? 16 : block % 8 == 0 ? 8 : 1;
  const T* in = bottom.data();
  T* out = top.mutable_data();
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < images; ++n) {
    int t = 0;
#ifdef _OPENMP
    t = omp_get_thread_num();
#endif
    const T* image = in + n * in_image;
    T* pooled = out + n * out_image;
    T* tile = tiles_.data() + t * kMaxLanes * plane;
    int32_t* tile_code = tile_codes_.data() + t * kMaxLanes * plane;
    with_code([&]<typename Code>() {
      // This image's codes (MAX, unless forward only): a blocked bottom's straight from its
      // tiles, a plain one's from the positions max_plane writes.
      Code* codes = max_ && !this->forward_only_ ? static_cast<Code*>(this->codes()) + n * out_image
                                                 : nullptr;
      int32_t* positions = plain_positions ? positions_.data() + t * out_image : nullptr;
      auto run = [&]<int kLanes>() {
        if (in_block > 1)
          forward_blocked_image<kLanes>(image, in_block, in_base.data(), pooled, out_block,
                                        out_base.data(), codes, tile, tile_code);
        else
          forward_planes_to_blocks<kLanes>(image, pooled, out_block, out_base.data(), positions,
                                           tile);
      };
      if (lanes == 16)
        run.template operator()<16>();
      else if (lanes == 8)
        run.template operator()<8>();
      else
        run.template operator()<1>();
      if (positions && codes)
        for (int64_t c = 0; c < channels_; ++c)
          encode_plane(positions + c * plane, codes + c * plane);
    });
  }
}

template <typename T>
template <int kLanes, typename Code>
void PoolingLayer<T>::forward_blocked_image(const T* in, int64_t in_block, const int64_t* in_base,
                                            T* out, int64_t out_block, const int64_t* out_base,
                                            Code* codes, T* tile, int32_t* tile_code) const {
  const int64_t plane = pooled_h_ * pooled_w_;
  for (int64_t c0 = 0; c0 < channels_; c0 += kLanes) {
    // Pool kLanes neighbouring channels into the tile, position by position.
    for (int64_t ph = 0; ph < pooled_h_; ++ph)
      for (int64_t pw = 0; pw < pooled_w_; ++pw) {
        const Window w = window(ph, pw);
        const int64_t p = ph * pooled_w_ + pw;
        // The unclipped window's corner, from which a code counts (pool_window_code.hpp).
        const int64_t corner_h = ph * stride_h_ - pad_h_, corner_w = pw * stride_w_ - pad_w_;
        if constexpr (std::is_same_v<T, float> && kLanes % 8 == 0) {
          if (max_) {
            for (int v = 0; v < kLanes; v += 8)
              window_max_8(in, in_base[c0] + v, in_block, width_, w.h0, w.h1, w.w0, w.w1, corner_h,
                           corner_w, kernel_w_, tile + p * kLanes + v, tile_code + p * kLanes + v);
            continue;
          }
        }
        T best[kLanes];
        int32_t at[kLanes];
        for (int l = 0; l < kLanes; ++l)
          best[l] = max_ ? -std::numeric_limits<T>::max() : T(0), at[l] = -1;
        for (int64_t h = w.h0; h < w.h1; ++h)
          for (int64_t x = w.w0; x < w.w1; ++x) {
            const T* run = in + in_base[c0] + (h * width_ + x) * in_block;
            const auto code = static_cast<int32_t>((h - corner_h) * kernel_w_ + x - corner_w);
            for (int l = 0; l < kLanes; ++l) {
              if (!max_) {
                best[l] += run[l];
                continue;
              }
              const bool better = run[l] > best[l];  // the first maximum wins, as window_max
              best[l] = better ? run[l] : best[l];
              at[l] = better ? code : at[l];
            }
          }
        for (int l = 0; l < kLanes; ++l) {
          tile[p * kLanes + l] = max_ ? best[l] : best[l] / static_cast<T>(w.divisor);
          tile_code[p * kLanes + l] = at[l];
        }
      }
    // Then store the tile along the top's memory: runs of channels, or runs of positions; the
    // codes in NCHW order (-1, none, becomes pool::kNone).
    if (codes)
      for (int l = 0; l < kLanes; ++l) {
        Code* plane_codes = codes + (c0 + l) * plane;
        for (int64_t p = 0; p < plane; ++p)
          plane_codes[p] = static_cast<Code>(tile_code[p * kLanes + l]);
      }
    if (out_block % kLanes == 0) {
      for (int64_t p = 0; p < plane; ++p)
        std::copy_n(tile + p * kLanes, kLanes, out + out_base[c0] + p * out_block);
      continue;
    }
    for (int l = 0; l < kLanes; ++l) {
      const int64_t first = out_base[c0 + l];
      for (int64_t p = 0; p < plane; ++p) out[first + p * out_block] = tile[p * kLanes + l];
    }
  }
}

template <typename T>
template <int kLanes>
void PoolingLayer<T>::forward_planes_to_blocks(const T* in, T* out, int64_t out_block,
                                               const int64_t* out_base, int32_t* argmax,
                                               T* tile) const {
  const int64_t in_plane = height_ * width_, plane = pooled_h_ * pooled_w_;
  for (int64_t c0 = 0; c0 < channels_; c0 += kLanes) {
    // The planes' fast path, a plane per channel; the argmax as the plain path keeps it.
    for (int l = 0; l < kLanes; ++l) {
      const int64_t c = c0 + l;
      if (max_)
        max_plane(in + c * in_plane, tile + l * plane, argmax + c * plane);
      else
        average_plane(in + c * in_plane, tile + l * plane);
    }
    // kLanes divides the top's block: the tile's channels are neighbours at each position.
    for (int64_t p = 0; p < plane; ++p) {
      T* run = out + out_base[c0] + p * out_block;
      for (int l = 0; l < kLanes; ++l) run[l] = tile[l * plane + p];
    }
  }
}

template <typename T>
void PoolingLayer<T>::backward_blocked(const Blob<T>& top, Blob<T>& bottom) const {
  const int64_t images = bottom.shape(0), in_image = bottom.count(1), out_image = top.count(1);
  const int64_t in_block = bottom.channel_block(), out_block = top.channel_block();
  const int64_t in_plane = height_ * width_, plane = pooled_h_ * pooled_w_;
  const std::vector<int64_t> in_base = channel_bases(channels_, in_block, in_plane);
  const std::vector<int64_t> out_base = channel_bases(channels_, out_block, plane);
  // MAX: each code's place in the plane from its window's corner (pool::decode without its
  // compares); channels a few at a time, neighbours in the blocked side's memory.
  std::vector<int64_t> place(max_ ? static_cast<size_t>(kernel_h_ * kernel_w_) : 0);
  for (int64_t k = 0; k < static_cast<int64_t>(place.size()); ++k)
    place[k] = k / kernel_w_ * width_ + k % kernel_w_;
  const int64_t lanes = channels_ % 16 == 0 ? 16 : channels_ % 8 == 0 ? 8 : 1;
  const T* out_diff = top.diff();
  T* in_diff = bottom.mutable_diff();
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < images; ++n) {
    const T* src = out_diff + n * out_image;
    T* dst = in_diff + n * in_image;
    std::fill(dst, dst + in_image, T(0));
    // Each input element receives its outputs' shares in the plain path's order: (ph, pw) rising.
    if (max_) {
      with_code([&]<typename Code>() {
        const Code* code = static_cast<const Code*>(codes()) + n * out_image;
        for (int64_t c0 = 0; c0 < channels_; c0 += lanes)
          for (int64_t ph = 0; ph < pooled_h_; ++ph)
            for (int64_t pw = 0; pw < pooled_w_; ++pw) {
              const int64_t p = ph * pooled_w_ + pw;
              const int64_t corner = (ph * stride_h_ - pad_h_) * width_ + pw * stride_w_ - pad_w_;
              for (int64_t c = c0; c < c0 + lanes; ++c) {
                const Code k = code[c * plane + p];
                if (k != pool::kNone<Code>)
                  dst[in_base[c] + (corner + place[k]) * in_block] +=
                      src[out_base[c] + p * out_block];
              }
            }
      });
      continue;
    }
    for (int64_t c = 0; c < channels_; ++c) {
      const T* from = src + out_base[c];
      for (int64_t ph = 0; ph < pooled_h_; ++ph)
        for (int64_t pw = 0; pw < pooled_w_; ++pw) {
          const Window w = window(ph, pw);
          const T share = from[(ph * pooled_w_ + pw) * out_block] / static_cast<T>(w.divisor);
          for (int64_t h = w.h0; h < w.h1; ++h)
            for (int64_t x = w.w0; x < w.w1; ++x)
              dst[in_base[c] + (h * width_ + x) * in_block] += share;
        }
    }
  }
}

// The class itself is instantiated in pooling_layer.cpp; these are the members defined here.
#define CGDP_BLOCKED_MEMBERS(T)                                              \
  template bool PoolingLayer<T>::handles_channel_block(bool, int64_t) const; \
  template void PoolingLayer<T>::forward_blocked(const Blob<T>&, Blob<T>&);  \
  template void PoolingLayer<T>::backward_blocked(const Blob<T>&, Blob<T>&) const;
CGDP_BLOCKED_MEMBERS(float)
CGDP_BLOCKED_MEMBERS(double)
#undef CGDP_BLOCKED_MEMBERS

}  // namespace cgdp
