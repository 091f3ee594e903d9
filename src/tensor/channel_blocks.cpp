// Channel-blocked layouts (channel_blocks.hpp): the reference reorder and the process-wide switch.
#include "cgdp/tensor/channel_blocks.hpp"

#include <atomic>

namespace cgdp {

namespace {

std::atomic<bool> blocks_enabled{true};

}  // namespace

template <typename T>
void reorder_channel_blocks(const T* in, int64_t from, T* out, int64_t to, const Shape& shape) {
  const int64_t channels = shape[1], height = shape[2], width = shape[3];
  const int64_t image = channels * height * width;
  for (int64_t n = 0; n < shape[0]; ++n)
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t h = 0; h < height; ++h)
        for (int64_t w = 0; w < width; ++w)
          out[n * image + blocked_offset(to, height, width, c, h, w)] =
              in[n * image + blocked_offset(from, height, width, c, h, w)];
}

template void reorder_channel_blocks(const float*, int64_t, float*, int64_t, const Shape&);
template void reorder_channel_blocks(const double*, int64_t, double*, int64_t, const Shape&);

bool channel_blocks_enabled() {
  return blocks_enabled.load();
}

void set_channel_blocks_enabled(bool enabled) {
  blocks_enabled.store(enabled);
}

}  // namespace cgdp
