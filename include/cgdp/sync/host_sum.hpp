// Deterministic summation of gradient buffers on the host: the step where host threads add up the
// chunks that every worker copied to pinned memory.
#pragma once

#include <cstdint>
#include <span>

namespace cgdp {

// dst[i] = the sum of srcs[0..k)[i] in the order of a binary reduction tree, the order in which
// ps0 gathers up its tree (Caffe's P2PSync): pairs at stride 1, then 2, 4, ..., e.g.
// ((s0 + s1) + (s2 + s3)) + s4. Every scheme (cgdp, ps0, --accumulate) sums in this one order,
// so they give the same bits; and the bits do not depend on `threads` or on how a buffer is split
// into ranges summed by separate calls. One pass reads every source once and writes dst once (bandwidth-bound).
// dst may be one of the sources exactly (summing in place); it must not partly overlap any.
// No sources sets dst to zero. threads <= 0 means OpenMP's default; small n uses fewer threads.
void sum_buffers(float* dst, std::span<const float* const> srcs, int64_t n, int threads);

// The OpenMP team sum_buffers uses for n elements with `threads` (>= 1): one thread per 32 Ki
// elements, at most `threads`, at least one. The cost model charges a chunk's sum at this team.
int sum_team(int64_t n, int threads);

// Each of `lanes` sum lanes' share of `threads` summing threads (both >= 1), at least one.
inline int sum_lane_threads(int threads, int lanes) {
  return threads / lanes > 1 ? threads / lanes : 1;
}

}  // namespace cgdp
