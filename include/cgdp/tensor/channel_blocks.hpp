// Channel-blocked activations: a 4-D N x C x H x W blob stored as [N][C/B][H][W][B]. B = 1 is
// Caffe's NCHW, the layout of model files, weights and the API; B = C is NHWC (channels_last);
// 16 is oneDNN's nChw16c. The net gives a blob a block where the layers on both sides of it run
// faster so (Net::choose_channel_blocks); its shape stays N x C x H x W whatever the block.
#pragma once

#include <cstdint>

#include "cgdp/tensor/shape.hpp"

namespace cgdp {

// Where element (c, h, w) of an image lies, counted from the image's first element.
inline int64_t blocked_offset(int64_t block, int64_t height, int64_t width, int64_t c, int64_t h,
                              int64_t w) {
  return ((c / block * height + h) * width + w) * block + c % block;
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
