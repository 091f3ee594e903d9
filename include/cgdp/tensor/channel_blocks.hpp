// Channel-blocked activations: a 4-D N x C x H x W blob stored as [N][C/B][H][W][B]. B = 1 is
// Caffe's NCHW, the layout of model files, weights and the API; B = C is NHWC (channels_last);
// 16 is oneDNN's nChw16c. The net gives a blob a block where the layers on both sides of it run
// faster so (Net::choose_channel_blocks); its shape stays N x C x H x W whatever the block.
#pragma once

#include <omp.h>

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

// An N x C x S tensor (S = H·W) in channel block B, cut into runs of up to kMaxLanes channels,
// for per-channel layers (BatchNorm, Scale). A run's channels are its lanes: side by side within
// a block, whole planes apart in NCHW (B = 1). Each lane's sum is taken in NCHW's order (image,
// then position), so it has the same bits in any block and any run; the lanes are independent
// chains of adds, which vectorise in a block and overlap in NCHW instead of each add waiting on
// the one before.
struct ChannelRuns {
  static constexpr int64_t kMaxLanes = 16;
  static constexpr int64_t kPlaneLanes = 8;  // NCHW: chains enough to hide a double add's latency
  int64_t images, channels, spatial, block;
  int64_t run_lanes;  // lanes of a full run

  // NCHW runs take fewer lanes where kPlaneLanes would leave some of `threads` without a run.
  ChannelRuns(int64_t images, int64_t channels, int64_t spatial, int64_t block,
              int threads = omp_get_max_threads())
      : images(images),
        channels(channels),
        spatial(spatial),
        block(block),
        run_lanes(block > 1 ? kMaxLanes : plane_lanes(channels, threads)) {}

  // The channels a run's lanes are drawn from: one block, or in NCHW all of them.
  int64_t group() const { return block == 1 ? channels : block; }
  int64_t runs_per_group() const { return (group() + run_lanes - 1) / run_lanes; }
  int64_t count() const { return channels / group() * runs_per_group(); }
  int64_t first_channel(int64_t run) const {
    return run / runs_per_group() * group() + run % runs_per_group() * run_lanes;
  }
  int64_t lanes(int64_t run) const {
    return std::min(run_lanes, group() - run % runs_per_group() * run_lanes);
  }
  // From one lane to the next, and from one position of a lane to its next.
  int64_t lane_stride() const { return block == 1 ? spatial : 1; }
  int64_t position_stride() const { return block; }
  // Where the run's first channel lies at image i, position 0.
  int64_t at(int64_t run, int64_t i) const {
    const int64_t c = first_channel(run);
    return (i * (channels / block) + c / block) * spatial * block + c % block;
  }

 private:
  static int64_t plane_lanes(int64_t channels, int threads) {
    int64_t lanes = kPlaneLanes;
    while (lanes > 1 && (channels + lanes - 1) / lanes < threads) lanes /= 2;
    return lanes;
  }
};

// Calls body(lanes) with a lane count as a compile-time constant where it is a power of two up
// to kMaxLanes (every full run), so that per-lane sums in the body's own arrays stay in registers
// and the lane loop unrolls; as an int64_t otherwise.
template <typename Body>
void with_lanes(int64_t lanes, Body body) {
  switch (lanes) {
    case 1:
      return body(std::integral_constant<int64_t, 1>{});
    case 2:
      return body(std::integral_constant<int64_t, 2>{});
    case 4:
      return body(std::integral_constant<int64_t, 4>{});
    case 8:
      return body(std::integral_constant<int64_t, 8>{});
    case ChannelRuns::kMaxLanes:
      return body(std::integral_constant<int64_t, ChannelRuns::kMaxLanes>{});
    default:
      return body(lanes);
  }
}

// Calls body(lanes, lane_stride) for run `run`, the stride a compile-time 1 in a block (the lanes
// load as one vector).
template <typename Body>
void with_run_lanes(const ChannelRuns& runs, int64_t run, Body body) {
  if (runs.block == 1)
    with_lanes(runs.lanes(run), [&](auto lanes) { body(lanes, runs.lane_stride()); });
  else
    with_lanes(runs.lanes(run),
               [&](auto lanes) { body(lanes, std::integral_constant<int64_t, 1>{}); });
}

// Calls f(element, lane) for every element of run `run` (lanes and lane_stride as with_run_lanes
// passes them), each lane in NCHW's order (image, then position) and the lanes side by side: the
// order of per-channel sums, whose chains then overlap.
template <typename Lanes, typename Stride, typename F>
void for_each_in_run_by_position(const ChannelRuns& runs, int64_t run, Lanes lanes,
                                 Stride lane_stride, F f) {
  const int64_t step = runs.position_stride();
  for (int64_t i = 0; i < runs.images; ++i) {
    const int64_t at = runs.at(run, i);
    for (int64_t j = 0; j < runs.spatial; ++j)
      for (int64_t l = 0; l < lanes; ++l) f(at + j * step + l * lane_stride, l);
  }
}

// The same elements in the order memory holds them (in NCHW a lane's plane after another), for
// element-wise work, which then vectorises in any block.
template <typename Lanes, typename Stride, typename F>
void for_each_in_run(const ChannelRuns& runs, int64_t run, Lanes lanes, Stride lane_stride, F f) {
  if constexpr (std::is_same_v<Stride, std::integral_constant<int64_t, 1>>) {
    for_each_in_run_by_position(runs, run, lanes, lane_stride, f);
  } else {
    for (int64_t l = 0; l < lanes; ++l)
      for (int64_t i = 0; i < runs.images; ++i) {
        const int64_t at = runs.at(run, i) + l * lane_stride;
        for (int64_t j = 0; j < runs.spatial; ++j) f(at + j * runs.position_stride(), l);
      }
  }
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
