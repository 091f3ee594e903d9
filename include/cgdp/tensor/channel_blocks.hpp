// Channel-blocked activations: a 4-D N x C x H x W blob stored as [N][C/B][H][W][B]. B = 1 is
// Caffe's NCHW, the layout of model files, weights and the API; B = C is NHWC (channels_last);
// 16 is oneDNN's nChw16c. The net gives a blob a block where the layers on both sides of it run
// faster so (Net::choose_channel_blocks); its shape stays N x C x H x W whatever the block.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "cgdp/tensor/shape.hpp"

namespace cgdp {

// Where element (c, h, w) of an image lies, counted from the image's first element.
inline int64_t blocked_offset(int64_t block, int64_t height, int64_t width, int64_t c, int64_t h,
                              int64_t w) {
  return ((c / block * height + h) * width + w) * block + c % block;
}

// An N x C x S tensor (S = H·W) in channel block B, cut into runs of up to kMaxLanes channels
// side by side within one block, for per-channel layers (BatchNorm, Scale): a sum per channel
// taken over a run's lanes in NCHW's order (image, then position) has the same bits in any block,
// and the lanes vectorise. With B = 1 a run is one channel.
struct ChannelRuns {
  static constexpr int64_t kMaxLanes = 16;
  int64_t images, channels, spatial, block;

  int64_t per_block() const { return (block + kMaxLanes - 1) / kMaxLanes; }
  int64_t count() const { return channels / block * per_block(); }
  int64_t first_channel(int64_t run) const {
    return run / per_block() * block + run % per_block() * kMaxLanes;
  }
  int64_t lanes(int64_t run) const {
    return std::min(kMaxLanes, block - run % per_block() * kMaxLanes);
  }
  // Where the run's first channel lies at image i, position 0; position j is j·block further on,
  // and the lanes follow it.
  int64_t at(int64_t run, int64_t i) const {
    return (i * (channels / block) + run / per_block()) * spatial * block +
           run % per_block() * kMaxLanes;
  }
};

// Calls body(lanes) with a run's lane count as a compile-time constant where it is 1 (NCHW) or
// kMaxLanes, so that per-lane sums in the body's own arrays stay in registers and the lane loop
// unrolls; as an int64_t otherwise.
template <typename Body>
void with_lanes(int64_t lanes, Body body) {
  if (lanes == 1)
    body(std::integral_constant<int64_t, 1>{});
  else if (lanes == ChannelRuns::kMaxLanes)
    body(std::integral_constant<int64_t, ChannelRuns::kMaxLanes>{});
  else
    body(lanes);
}

// Calls f(element, channel) for every element of `runs`' tensor, on OpenMP's threads; f must
// treat each element alone. Loops by channel row in NCHW and by lanes in a block otherwise, so
// that either vectorises.
template <typename F>
void for_each_element(const ChannelRuns& runs, F f) {
  const int64_t c = runs.channels, s = runs.spatial, block = runs.block;
  if (block == 1) {
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < runs.images * c; ++row)
      for (int64_t e = row * s; e < (row + 1) * s; ++e) f(e, row % c);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t plane = 0; plane < runs.images * (c / block); ++plane) {
    const int64_t first = plane % (c / block) * block;
    for (int64_t j = 0; j < s; ++j)
      for (int64_t b = 0; b < block; ++b) f((plane * s + j) * block + b, first + b);
  }
}

// Copies the N x C x H x W tensor `shape` from block `from` (at `in`) to block `to` (at `out`).
template <typename T>
void reorder_channel_blocks(const T* in, int64_t from, T* out, int64_t to, const Shape& shape);

// Whether nets may choose blocks other than 1; process-wide, like layer_precision(): set before
// nets are built. On by default; `--layout nchw` turns it off, and tests compare both.
bool channel_blocks_enabled();
void set_channel_blocks_enabled(bool enabled);

class ScopedChannelBlocks {
 public:
  explicit ScopedChannelBlocks(bool enabled) : before_(channel_blocks_enabled()) {
    set_channel_blocks_enabled(enabled);
  }
  ~ScopedChannelBlocks() { set_channel_blocks_enabled(before_); }
  ScopedChannelBlocks(const ScopedChannelBlocks&) = delete;
  ScopedChannelBlocks& operator=(const ScopedChannelBlocks&) = delete;

 private:
  bool before_;
};

}  // namespace cgdp
