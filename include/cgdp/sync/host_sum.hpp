// Deterministic summation of gradient buffers on the host: the step where host threads add up the
// chunks that every worker copied to pinned memory.
#pragma once

#include <cstdint>
#include <span>

#include "cgdp/sync/exchange_dtype.hpp"

namespace cgdp {

// dst[i] = the sum of srcs[0..k)[i] in the order of a binary reduction tree, the order in which
// ps0 gathers up its tree (Caffe's P2PSync): pairs at stride 1, then 2, 4, ..., e.g.
// ((s0 + s1) + (s2 + s3)) + s4. Every scheme (cgdp, ps0, --accumulate) sums in this one order,
// so they give the same bits; and the bits do not depend on `threads` or on how a buffer is split
// into ranges summed by separate calls. One pass reads every source once and writes dst once (bandwidth-bound).
// dst may be one of the sources exactly (summing in place); it must not partly overlap any.
// No sources sets dst to zero. threads <= 0 means OpenMP's default; small n uses fewer threads.
void sum_buffers(float* dst, std::span<const float* const> srcs, int64_t n, int threads);

// The 16-bit exchange's sum (exchange_dtype.hpp, bf16 or fp16): dst[i] = narrow(scale_out *
// sum_k widen(srcs[k][i]) * unscale[k]), the widened terms added in sum_buffers' tree order in
// fp32 and the sum rounded once. `unscale` holds one factor per source, or is empty (all 1).
// The same bits for any `threads` and any split into ranges. dst may be a source exactly.
void sum_buffers_16(uint16_t* dst, std::span<const uint16_t* const> srcs,
                    std::span<const float> unscale, float scale_out, ExchangeDtype dtype,
                    int64_t n, int threads);

// Scale-out's 16-bit exchange: the same widened, unscaled sum in the same order, left in fp32 for
// the shards (the global sum is narrowed once, after the pull: narrow_buffer).
void sum_buffers_16_to_fp32(float* dst, std::span<const uint16_t* const> srcs,
                            std::span<const float> unscale, ExchangeDtype dtype, int64_t n,
                            int threads);
// dst[i] = narrow(src[i] * scale), bf16 or fp16, rounded to nearest even.
void narrow_buffer(uint16_t* dst, const float* src, float scale, ExchangeDtype dtype, int64_t n,
                   int threads);
// The largest |src[i]|; NaN if any element is NaN.
float max_abs(const float* src, int64_t n);

// The OpenMP team sum_buffers uses for n elements with `threads` (>= 1): one thread per 32 Ki
// elements, at most `threads`, at least one. The cost model charges a chunk's sum at this team.
int sum_team(int64_t n, int threads);

// Each of `lanes` sum lanes' share of `threads` summing threads (both >= 1), at least one.
inline int sum_lane_threads(int threads, int lanes) {
  return threads / lanes > 1 ? threads / lanes : 1;
}

}  // namespace cgdp
