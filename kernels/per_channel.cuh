// Per-channel work over a tensor viewed as num x channels x spatial (NCHW), without a 64-bit
// division per element (nvcc only). Elementwise kernels run one block per tile of one plane (an
// image's channel: `spatial` contiguous elements), or, for planes shorter than a block, a flat
// loop with 32-bit divisions. Per-channel sums run one block per (channel, slice of images) into
// float64 partial sums in fixed trees; a kernel with a thread per channel then adds a channel's
// partials in slice order, so every run gives the same sums.
#pragma once

#include <algorithm>

#include "launch.cuh"
#include "per_channel_scratch.cuh"

namespace cgdp::kernels {

constexpr int kPlaneTile = 1024;  // elements of a plane per block of an elementwise kernel

// kThreads threads; flat: grid-stride over all elements; else grid x: the planes, grid y: tiles
// of a plane.
struct PlaneLaunch {
  dim3 grid;
  bool flat = false;
};
inline PlaneLaunch plane_launch(const ChannelView& v) {
  const int64_t planes = v.num * v.channels;
  const int64_t tiles = (v.spatial + kPlaneTile - 1) / kPlaneTile;
  if (v.spatial < kThreads || planes > INT_MAX || tiles > 65535)
    return {dim3(blocks_for(planes * v.spatial)), true};
  return {dim3(static_cast<unsigned>(planes), static_cast<unsigned>(tiles)), false};
}

// body(i, c) for this thread's flat indices i, each with its channel c.
template <typename Body>
__device__ __forceinline__ void for_elements(const ChannelView& v, bool flat, Body body) {
  if (flat) {
    CGDP_KERNEL_LOOP(i, v.num * v.channels * v.spatial) {
      body(i, divide(divide(i, v.spatial).quotient, v.channels).remainder);
    }
    return;
  }
  const int64_t plane = blockIdx.x;
  const int64_t c = plane % v.channels;
  const int64_t begin = static_cast<int64_t>(blockIdx.y) * kPlaneTile;
  const int64_t end = min64(v.spatial, begin + kPlaneTile);
  const int64_t base = plane * v.spatial;
  for (int64_t j = begin + threadIdx.x; j < end; j += blockDim.x) body(base + j, c);
}

// Grid x: the channels; grid y: the slices. kReduceThreads threads.
inline dim3 slice_grid(const ChannelView& v) {
  return dim3(static_cast<unsigned>(v.channels), static_cast<unsigned>(channel_slices(v).count));
}

// Block (c, s): sums the pair term(i, c) over channel c's elements in slice s into
// partials[c * S + s] and partials[(C + c) * S + s].
template <typename Term>
__device__ void slice_sums(const ChannelView& v, Term term, double* partials) {
  __shared__ double scratch[kReduceThreads];
  const ChannelSlices sl = channel_slices(v);
  const int64_t c = blockIdx.x, s = blockIdx.y;
  const int64_t first = s * sl.images, last = min64(v.num, first + sl.images);
  double a = 0, b = 0;
  const auto add = [&](int64_t n, int64_t j) {
    const double2 t = term((n * v.channels + c) * v.spatial + j, c);
    a += t.x;
    b += t.y;
  };
  if (v.spatial >= blockDim.x) {  // image by image, the threads along the plane
    for (int64_t n = first; n < last; ++n)
      for (int64_t j = threadIdx.x; j < v.spatial; j += blockDim.x) add(n, j);
  } else {  // short planes: the threads across images
    for (int64_t k = threadIdx.x; k < (last - first) * v.spatial; k += blockDim.x) {
      const QuotientRemainder at = divide(k, v.spatial);
      add(first + at.quotient, at.remainder);
    }
  }
  a = block_sum(a, scratch);
  b = block_sum(b, scratch);
  if (threadIdx.x != 0) return;
  partials[c * sl.count + s] = a;
  partials[(v.channels + c) * sl.count + s] = b;
}

// Channel c's two sums, its partials added in slice order.
__device__ __forceinline__ double2 channel_sums(const ChannelView& v, const double* partials,
                                                int64_t c) {
  const int count = channel_slices(v).count;
  double a = 0, b = 0;
  for (int s = 0; s < count; ++s) {
    a += partials[c * count + s];
    b += partials[(v.channels + c) * count + s];
  }
  return make_double2(a, b);
}

}  // namespace cgdp::kernels
