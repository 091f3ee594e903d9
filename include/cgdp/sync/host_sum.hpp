// Deterministic summation of gradient buffers on the host: the step where host threads add up the
// chunks that every worker copied to pinned memory.
#pragma once

#include <cstdint>
#include <span>

namespace cgdp {

// dst[i] = (((srcs[0][i] + srcs[1][i]) + srcs[2][i]) + ...) for i in [0, n), always in this
// order, so the bits do not depend on `threads` or on how a buffer is split into ranges summed
// by separate calls. One pass reads every source once and writes dst once (bandwidth-bound).
// dst may be one of the sources exactly (summing in place); it must not partly overlap any.
// No sources sets dst to zero. threads <= 0 means OpenMP's default; small n uses fewer threads.
void sum_buffers(float* dst, std::span<const float* const> srcs, int64_t n, int threads);

}  // namespace cgdp
