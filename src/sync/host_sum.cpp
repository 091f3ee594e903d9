// Deterministic host summation in the order of a binary reduction tree; a block of elements keeps
// its partial sums in vector registers (or L1) while every source streams through it once.
#include "cgdp/sync/host_sum.hpp"

#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "cgdp/core/error.hpp"

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

// Up to three sources the tree is the left-to-right order: ((s0 + s1) + s2).
void sum_block_linear(float* dst, const float* const* srcs, int nsrc, int64_t begin) {
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

// The tree as a binary counter: source k merges with as many pending partial sums as k has
// trailing one bits; what is pending at the end folds from the smallest partial up.
template <typename Value, typename Load>
Value tree_sum(int nsrc, Load load_source) {
  constexpr int kMaxDepth = 32;  // nsrc < 2^31
  Value pending[kMaxDepth];
  int depth = 0;
  for (int k = 0; k < nsrc; ++k) {
    Value cur = load_source(k);
    for (int carries = std::countr_one(static_cast<unsigned>(k)); carries > 0; --carries)
      cur = pending[--depth] + cur;
    pending[depth++] = cur;
  }
  Value acc = pending[--depth];
  while (depth > 0) acc = pending[--depth] + acc;
  return acc;
}

// kVecs vectors added as one value, so tree_sum works on a whole block at once.
struct Block {
  Vec v[kVecs];
  friend Block operator+(const Block& a, const Block& b) {
    Block r;
#pragma GCC unroll 8
    for (int i = 0; i < kVecs; ++i) r.v[i] = a.v[i] + b.v[i];
    return r;
  }
};

// The same tree with the source count known at compile time: sources [First, First + Count)
// split at the largest power of two below Count, so (0..3) + 4 for five; fully unrolled, the
// partial sums stay in registers.
template <int First, int Count>
Vec tree_vec(const float* const* srcs, int64_t i) {
  if constexpr (Count == 1) {
    return load(srcs[First] + i);
  } else {
    constexpr int kLeft = std::bit_floor(static_cast<unsigned>(Count - 1));
    return tree_vec<First, kLeft>(srcs, i) + tree_vec<First + kLeft, Count - kLeft>(srcs, i);
  }
}

template <int N>
void sum_block_fixed(float* dst, const float* const* srcs, int64_t begin) {
  Vec out[kVecs];
#pragma GCC unroll 8
  for (int v = 0; v < kVecs; ++v) out[v] = tree_vec<0, N>(srcs, begin + v * kLanes);
#pragma GCC unroll 8
  for (int v = 0; v < kVecs; ++v) store(dst + begin + v * kLanes, out[v]);
}

// dst[begin, begin + kBlock). Sources are read before dst is written, so dst may be a source.
void sum_block(float* dst, const float* const* srcs, int nsrc, int64_t begin) {
  switch (nsrc) {
    case 4:
      return sum_block_fixed<4>(dst, srcs, begin);
    case 5:
      return sum_block_fixed<5>(dst, srcs, begin);
    case 6:
      return sum_block_fixed<6>(dst, srcs, begin);
    case 7:
      return sum_block_fixed<7>(dst, srcs, begin);
    case 8:
      return sum_block_fixed<8>(dst, srcs, begin);
    default:
      break;
  }
  if (nsrc <= 3) return sum_block_linear(dst, srcs, nsrc, begin);
  const Block sum = tree_sum<Block>(nsrc, [&](int k) {
    Block b;
#pragma GCC unroll 8
    for (int i = 0; i < kVecs; ++i) b.v[i] = load(srcs[k] + begin + i * kLanes);
    return b;
  });
#pragma GCC unroll 8
  for (int v = 0; v < kVecs; ++v) store(dst + begin + v * kLanes, sum.v[v]);
}

// The last, partial block: same order, one element at a time.
void sum_tail(float* dst, const float* const* srcs, int nsrc, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i)
    dst[i] = tree_sum<float>(nsrc, [&](int k) { return srcs[k][i]; });
}

// One block of a 16-bit source widened to fp32 and unscaled.
template <ExchangeDtype D>
Block widened_block(const uint16_t* p, float unscale) {
  float values[kBlock];
#pragma GCC unroll 8
  for (int64_t i = 0; i < kBlock; ++i)
    values[i] = (D == ExchangeDtype::Bf16 ? from_bf16(p[i]) : from_fp16(p[i])) * unscale;
  Block b;
  std::memcpy(&b, values, sizeof b);
  return b;
}

template <ExchangeDtype D>
uint16_t narrowed(float value) {
  return D == ExchangeDtype::Bf16 ? to_bf16(value) : to_fp16(value);
}

// The sum's element written out: narrowed after scaling (Out = uint16_t), or as fp32 (float).
template <ExchangeDtype D, typename Out>
Out written(float sum, float scale_out) {
  if constexpr (std::is_same_v<Out, float>)
    return sum;
  else
    return narrowed<D>(sum * scale_out);
}

template <ExchangeDtype D, typename Out>
void sum_16(Out* dst, const uint16_t* const* srcs, const float* unscale, int nsrc, float scale_out,
            int64_t n, int team) {
  const int64_t full_blocks = n / kBlock;
#pragma omp parallel for schedule(static) num_threads(team) if (team > 1)
  for (int64_t b = 0; b < full_blocks; ++b) {
    const int64_t begin = b * kBlock;
    const Block sum = tree_sum<Block>(
        nsrc, [&](int k) { return widened_block<D>(srcs[k] + begin, unscale[k]); });
    float values[kBlock];
    std::memcpy(values, &sum, sizeof values);
#pragma GCC unroll 8
    for (int64_t i = 0; i < kBlock; ++i) dst[begin + i] = written<D, Out>(values[i], scale_out);
  }
  for (int64_t i = full_blocks * kBlock; i < n; ++i) {
    const float sum = tree_sum<float>(nsrc, [&](int k) {
      return (D == ExchangeDtype::Bf16 ? from_bf16(srcs[k][i]) : from_fp16(srcs[k][i])) *
             unscale[k];
    });
    dst[i] = written<D, Out>(sum, scale_out);
  }
}

template <typename Out>
void sum_16_any(Out* dst, std::span<const uint16_t* const> srcs, std::span<const float> unscale,
                float scale_out, ExchangeDtype dtype, int64_t n, int threads) {
  CGDP_ASSERT(dtype != ExchangeDtype::Fp32 && !srcs.empty());
  CGDP_ASSERT(unscale.empty() || unscale.size() == srcs.size());
  if (n <= 0) return;
  const std::vector<float> ones(srcs.size(), 1.f);
  const float* factors = unscale.empty() ? ones.data() : unscale.data();
  const int nsrc = static_cast<int>(srcs.size());
  const int team = sum_team(n, threads > 0 ? threads : omp_get_max_threads());
  if (dtype == ExchangeDtype::Bf16)
    sum_16<ExchangeDtype::Bf16>(dst, srcs.data(), factors, nsrc, scale_out, n, team);
  else
    sum_16<ExchangeDtype::Fp16>(dst, srcs.data(), factors, nsrc, scale_out, n, team);
}

}  // namespace

void sum_buffers_16(uint16_t* dst, std::span<const uint16_t* const> srcs,
                    std::span<const float> unscale, float scale_out, ExchangeDtype dtype, int64_t n,
                    int threads) {
  sum_16_any(dst, srcs, unscale, scale_out, dtype, n, threads);
}

void sum_buffers_16_to_fp32(float* dst, std::span<const uint16_t* const> srcs,
                            std::span<const float> unscale, ExchangeDtype dtype, int64_t n,
                            int threads) {
  sum_16_any(dst, srcs, unscale, 1.f, dtype, n, threads);
}

void narrow_buffer(uint16_t* dst, const float* src, float scale, ExchangeDtype dtype, int64_t n,
                   int threads) {
  CGDP_ASSERT(dtype != ExchangeDtype::Fp32);
  const int team = sum_team(n, threads > 0 ? threads : omp_get_max_threads());
  if (dtype == ExchangeDtype::Bf16) {
#pragma omp parallel for schedule(static) num_threads(team) if (team > 1)
    for (int64_t i = 0; i < n; ++i) dst[i] = to_bf16(src[i] * scale);
  } else {
#pragma omp parallel for schedule(static) num_threads(team) if (team > 1)
    for (int64_t i = 0; i < n; ++i) dst[i] = to_fp16(src[i] * scale);
  }
}

float max_abs(const float* src, int64_t n) {
  float m = 0.f;
  for (int64_t i = 0; i < n; ++i) {
    const float a = std::fabs(src[i]);
    if (std::isnan(a)) return a;  // so that fp16_scale_for gives 1 and the NaN shows
    m = std::max(m, a);
  }
  return m;
}

int sum_team(int64_t n, int threads) {
  return static_cast<int>(std::clamp<int64_t>(n / kMinPerThread, 1, std::max(threads, 1)));
}

void sum_buffers(float* dst, std::span<const float* const> srcs, int64_t n, int threads) {
  if (n <= 0) return;
  if (srcs.empty()) {
    std::fill(dst, dst + n, 0.f);
    return;
  }
  const int nsrc = static_cast<int>(srcs.size());
  const float* const* s = srcs.data();
  const int64_t full_blocks = n / kBlock;
  const int team = sum_team(n, threads > 0 ? threads : omp_get_max_threads());
  // Static schedule: each thread sums one contiguous range of blocks.
#pragma omp parallel for schedule(static) num_threads(team) if (team > 1)
  for (int64_t b = 0; b < full_blocks; ++b) sum_block(dst, s, nsrc, b * kBlock);
  sum_tail(dst, s, nsrc, full_blocks * kBlock, n);
}

}  // namespace cgdp
