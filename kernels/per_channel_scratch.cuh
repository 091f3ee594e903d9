// How the per-channel sums of kernels/per_channel.cuh split a tensor viewed as num x channels x
// spatial, and the device scratch they need: plain C++, so that a layer can size the scratch.
#pragma once

#include <cstdint>

#ifndef CGDP_HOST_DEVICE
#ifdef __CUDACC__
#define CGDP_HOST_DEVICE __host__ __device__
#else
#define CGDP_HOST_DEVICE
#endif
#endif

namespace cgdp::kernels {

struct ChannelView {
  int64_t num = 0, channels = 0, spatial = 0;
};

// At most this many partial sums of each kind: the scratch stays small (64 KiB for both kinds)
// while a net's widest layers still have a block per channel.
inline constexpr int64_t kMaxPartials = 4096;
inline constexpr int64_t kSliceElements = 8192;  // the least a slice is worth a block for

// Each channel's elements in `count` slices of `images` consecutive images each (the last fewer).
struct ChannelSlices {
  int count = 1;
  int64_t images = 0;
};
CGDP_HOST_DEVICE inline ChannelSlices channel_slices(const ChannelView& v) {
  if (v.num <= 0) return {1, 0};
  const int64_t by_work = v.num * v.spatial / kSliceElements;
  const int64_t by_room = kMaxPartials / (v.channels > 0 ? v.channels : 1);
  int64_t count = by_work < by_room ? by_work : by_room;
  if (count > v.num) count = v.num;
  if (count < 1) count = 1;
  const int64_t images = (v.num + count - 1) / count;
  return {static_cast<int>((v.num + images - 1) / (images > 0 ? images : 1)), images};
}

// Bytes of device scratch: both kinds of partial sums, then two float64 values per channel.
inline int64_t per_channel_scratch_bytes(const ChannelView& v) {
  return static_cast<int64_t>(sizeof(double)) * 2 * v.channels * (channel_slices(v).count + 1);
}

// The most per_channel_scratch_bytes can be for `channels`, whatever the batch and planes:
// at most max(kMaxPartials, channels) partials of each kind.
inline int64_t per_channel_scratch_bound(int64_t channels) {
  const int64_t partials = channels > kMaxPartials ? channels : kMaxPartials;
  return static_cast<int64_t>(sizeof(double)) * 2 * (partials + channels);
}

}  // namespace cgdp::kernels
