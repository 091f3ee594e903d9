// Deterministic host summation: per element, sources are added left to right; a block of elements
// keeps its running sums in vector registers while every source streams through it once.
#include "cgdp/sync/host_sum.hpp"

#include <omp.h>

#include <algorithm>
#include <cstring>

namespace cgdp {

namespace {

// Eight floats: one AVX2 register under -march=x86-64-v3 (GCC/Clang vector extension, so the
// code stays portable). Lane-wise addition rounds exactly as scalar addition does.
using Vec = float __attribute__((vector_size(32)));
constexpr int kLanes = sizeof(Vec) / sizeof(float);
// Vectors per block: eight accumulators hide the latency of the additions.
constexpr int kVecs = 8;
constexpr int64_t kBlock = kLanes * kVecs;
// Fewer elements than this per thread cost more to hand out than they save.
constexpr int64_t kMinPerThread = 1 << 15;

Vec load(const float* p) {
  Vec v;
  std::memcpy(&v, p, sizeof v);  // unaligned load
  return v;
}

void store(float* p, Vec v) {
  std::memcpy(p, &v, sizeof v);
}

// dst[begin, begin + kBlock). Sources are read before dst is written, so dst may be a source.
void sum_block(float* dst, const float* const* srcs, int nsrc, int64_t begin) {
  Vec acc[kVecs];
#pragma GCC unroll 8
  for (int v = 0; v < kVecs; ++v) acc[v] = load(srcs[0] + begin + v * kLanes);
  for (int k = 1; k < nsrc; ++k) {
    const float* s = srcs[k] + begin;
#pragma GCC unroll 8
    for (int v = 0; v < kVecs; ++v) acc[v] += load(s + v * kLanes);
  }
#pragma GCC unroll 8
  for (int v = 0; v < kVecs; ++v) store(dst + begin + v * kLanes, acc[v]);
}

// The last, partial block: same order, one element at a time.
void sum_tail(float* dst, const float* const* srcs, int nsrc, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) {
    float acc = srcs[0][i];
    for (int k = 1; k < nsrc; ++k) acc += srcs[k][i];
    dst[i] = acc;
  }
}

}  // namespace

void sum_buffers(float* dst, std::span<const float* const> srcs, int64_t n, int threads) {
  if (n <= 0) return;
  if (srcs.empty()) {
    std::fill(dst, dst + n, 0.f);
    return;
  }
  const int nsrc = static_cast<int>(srcs.size());
  const float* const* s = srcs.data();
  const int64_t full_blocks = n / kBlock;
  const int64_t wanted = threads > 0 ? threads : omp_get_max_threads();
  const int team = static_cast<int>(std::clamp<int64_t>(n / kMinPerThread, 1, wanted));
  // Static schedule: each thread sums one contiguous range of blocks.
#pragma omp parallel for schedule(static) num_threads(team) if (team > 1)
  for (int64_t b = 0; b < full_blocks; ++b) sum_block(dst, s, nsrc, b * kBlock);
  sum_tail(dst, s, nsrc, full_blocks * kBlock, n);
}

}  // namespace cgdp
