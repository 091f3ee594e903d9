// Host summation: exact sums, the fixed binary-tree order (ps0's), and identical bits whatever the
// thread count or split into ranges.
#include "cgdp/sync/host_sum.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace cgdp {
namespace {

using Buffers = std::vector<std::vector<float>>;

std::vector<const float*> pointers(const Buffers& buffers, int64_t offset = 0) {
  std::vector<const float*> p;
  for (const auto& b : buffers) p.push_back(b.data() + offset);
  return p;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

// Floats with wide-ranging magnitudes and signs: their sums round, so order shows in the bits.
Buffers random_buffers(int nsrc, int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> mantissa(-1.f, 1.f);
  std::uniform_int_distribution<int> exponent(-20, 20);
  Buffers buffers(nsrc, std::vector<float>(n));
  for (auto& b : buffers)
    for (auto& x : b) x = std::ldexp(mantissa(rng), exponent(rng));
  return buffers;
}

// The tree as ps0 walks it, one element at a time: pairs at stride 1, then 2, 4, ... into the
// left member of each pair. The order sum_buffers promises.
std::vector<float> reference_sum(const Buffers& buffers, int64_t n) {
  std::vector<float> out(n);
  const size_t k = buffers.size();
  std::vector<float> v(k);
  for (int64_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < k; ++j) v[j] = buffers[j][i];
    for (size_t stride = 1; stride < k; stride *= 2)
      for (size_t child = stride; child < k; child += 2 * stride) v[child - stride] += v[child];
    out[i] = v[0];
  }
  return out;
}

TEST(HostSum, SmallIntegersSumExactlyForEveryCountSizeAndThreadCount) {
  for (const int nsrc : {1, 2, 3, 4, 8}) {
    for (const int64_t n : {int64_t{0}, int64_t{1}, int64_t{17}, int64_t{1000003}}) {
      Buffers buffers(nsrc, std::vector<float>(n));
      std::vector<float> expected(n, 0.f);
      for (int k = 0; k < nsrc; ++k)
        for (int64_t i = 0; i < n; ++i) {
          const int value = static_cast<int>((i * 7 + k * 13) % 201) - 100;
          buffers[k][i] = static_cast<float>(value);
          expected[i] += static_cast<float>(value);  // integers: exact in any order
        }
      for (const int threads : {1, 2, 3, 7}) {
        std::vector<float> dst(n, -1.f);
        sum_buffers(dst.data(), pointers(buffers), n, threads);
        EXPECT_TRUE(same_bits(dst, expected))
            << nsrc << " sources, n=" << n << ", " << threads << " threads";
      }
    }
  }
}

TEST(HostSum, AddsInBinaryTreeOrder) {
  // 2^24 + 1 rounds back to 2^24: ((a + b) + c) keeps 2^24; (a + b) + (c + d) gains 2.
  const Buffers three = {{16777216.f}, {1.f}, {1.f}};
  const Buffers four = {{16777216.f}, {1.f}, {1.f}, {1.f}};
  float out = 0;
  sum_buffers(&out, pointers(three), 1, 1);
  EXPECT_EQ(out, 16777216.f);
  sum_buffers(&out, pointers(four), 1, 1);
  EXPECT_EQ(out, 16777218.f);  // left to right would give 16777216

  for (const int nsrc : {4, 5, 6, 7, 8, 11}) {
    const int64_t n = 100003;
    const Buffers buffers = random_buffers(nsrc, n, 7 + nsrc);
    const std::vector<float> expected = reference_sum(buffers, n);
    std::vector<float> left_to_right(n);
    for (int64_t i = 0; i < n; ++i)
      for (const auto& b : buffers) left_to_right[i] += b[i];
    EXPECT_FALSE(same_bits(left_to_right, expected)) << "inputs too tame to show order";
    for (const int threads : {1, 2, 3, 7}) {
      std::vector<float> dst(n);
      sum_buffers(dst.data(), pointers(buffers), n, threads);
      EXPECT_TRUE(same_bits(dst, expected)) << nsrc << " sources, " << threads << " threads";
    }
  }
}

TEST(HostSum, RangesSummedSeparatelyGiveTheBitsOfOneCall) {
  const int64_t n = 1000003;
  const Buffers buffers = random_buffers(4, n, 11);
  std::vector<float> whole(n);
  sum_buffers(whole.data(), pointers(buffers), n, 2);

  std::mt19937_64 rng(3);
  for (int trial = 0; trial < 4; ++trial) {
    std::vector<float> pieces(n, 0.f);
    for (int64_t begin = 0; begin < n;) {
      const int64_t len = std::min<int64_t>(n - begin, 1 + rng() % 200000);
      sum_buffers(pieces.data() + begin, pointers(buffers, begin), len, 1 + trial);
      begin += len;
    }
    EXPECT_TRUE(same_bits(pieces, whole)) << "trial " << trial;
  }
}

TEST(HostSum, SumsInPlaceIntoAnySource) {
  const int64_t n = 70001;
  const Buffers buffers = random_buffers(5, n, 5);
  const std::vector<float> expected = reference_sum(buffers, n);
  for (int k = 0; k < 5; ++k) {
    Buffers work = buffers;
    sum_buffers(work[k].data(), pointers(work), n, 2);
    EXPECT_TRUE(same_bits(work[k], expected)) << "dst = source " << k;
  }
}

TEST(HostSum, NoSourcesGiveZeros) {
  std::vector<float> dst(100, 5.f);
  sum_buffers(dst.data(), {}, 100, 0);
  EXPECT_TRUE(same_bits(dst, std::vector<float>(100, 0.f)));
}

}  // namespace
}  // namespace cgdp

namespace cgdp {
namespace {

// ---- the 16-bit exchange's sum (exchange_dtype.hpp) ----

// Random 16-bit values of magnitude about 1, narrowed from random floats.
std::vector<uint16_t> narrowed_values(int64_t n, ExchangeDtype dtype, float scale, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<uint16_t> out(n);
  for (uint16_t& v : out)
    v = dtype == ExchangeDtype::Bf16 ? to_bf16(dist(rng) * scale) : to_fp16(dist(rng) * scale);
  return out;
}

float widened(uint16_t v, ExchangeDtype dtype) {
  return dtype == ExchangeDtype::Bf16 ? from_bf16(v) : from_fp16(v);
}

// The sum is the fp32 tree sum of the widened, unscaled inputs, rounded once: bit for bit what
// sum_buffers gives on them, narrowed; the same bits for any thread count and split.
TEST(HostSum16, IsTheFp32TreeSumRoundedOnceForAnyThreadsAndSplit) {
  for (ExchangeDtype dtype : {ExchangeDtype::Bf16, ExchangeDtype::Fp16}) {
    SCOPED_TRACE(to_string(dtype));
    const int64_t n = 100003;
    const int workers = 5;
    // fp16: each input scaled by its own power of two, as the workers send them.
    std::vector<float> scales, unscale;
    for (int w = 0; w < workers; ++w) scales.push_back(dtype == ExchangeDtype::Fp16 ? std::ldexp(1.f, 10 + w) : 1.f);
    for (float s : scales) unscale.push_back(1.f / s);
    const float scale_out = dtype == ExchangeDtype::Fp16 ? 4096.f : 1.f;
    std::vector<std::vector<uint16_t>> inputs;
    std::vector<const uint16_t*> srcs;
    for (int w = 0; w < workers; ++w) {
      inputs.push_back(narrowed_values(n, dtype, scales[w], 7 + w));
      srcs.push_back(inputs.back().data());
    }
    std::vector<std::vector<float>> wide(workers, std::vector<float>(n));
    std::vector<const float*> wide_srcs;
    for (int w = 0; w < workers; ++w) {
      for (int64_t i = 0; i < n; ++i) wide[w][i] = widened(inputs[w][i], dtype) * unscale[w];
      wide_srcs.push_back(wide[w].data());
    }
    std::vector<float> fp32(n);
    sum_buffers(fp32.data(), wide_srcs, n, 1);
    std::vector<uint16_t> want(n);
    for (int64_t i = 0; i < n; ++i)
      want[i] = dtype == ExchangeDtype::Bf16 ? to_bf16(fp32[i] * scale_out) : to_fp16(fp32[i] * scale_out);
    for (int threads : {1, 2, 3}) {
      std::vector<uint16_t> got(n, 0xffff);
      sum_buffers_16(got.data(), srcs, unscale, scale_out, dtype, n, threads);
      EXPECT_EQ(got, want) << threads << " threads";
    }
    std::vector<uint16_t> split(n, 0xffff);
    for (int64_t begin : {int64_t{0}, int64_t{777}}) {
      const int64_t end = begin == 0 ? 777 : n;
      std::vector<const uint16_t*> part;
      for (const uint16_t* s : srcs) part.push_back(s + begin);
      sum_buffers_16(split.data() + begin, part, unscale, scale_out, dtype, end - begin, 2);
    }
    EXPECT_EQ(split, want);
    // Scale-out's form: the same sum left in fp32, narrowed later in one pass.
    std::vector<float> wide_sum(n, -1.f);
    sum_buffers_16_to_fp32(wide_sum.data(), srcs, unscale, dtype, n, 2);
    EXPECT_EQ(0, std::memcmp(wide_sum.data(), fp32.data(), n * sizeof(float)));
    std::vector<uint16_t> narrowed_later(n, 0xffff);
    narrow_buffer(narrowed_later.data(), wide_sum.data(), scale_out, dtype, n, 2);
    EXPECT_EQ(narrowed_later, want);
    // Against float64: one rounding of the sum, to 8 (bf16) or 11 (fp16) bits.
    double worst = 0;
    for (int64_t i = 0; i < n; i += 13) {
      double exact = 0;
      for (int w = 0; w < workers; ++w) exact += double(widened(inputs[w][i], dtype)) * unscale[w];
      if (std::abs(exact) < 1e-3) continue;  // cancellation: fp32's own rounding dominates
      worst = std::max(worst, std::abs(widened(want[i], dtype) / scale_out - exact) / std::abs(exact));
    }
    EXPECT_LE(worst, dtype == ExchangeDtype::Bf16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -10));
  }
}

TEST(HostSum16, MaxAbsIsTheLargestMagnitudeOrNaN) {
  std::vector<float> v = {0.5f, -3.f, 2.f, -0.f};
  EXPECT_EQ(max_abs(v.data(), 4), 3.f);
  EXPECT_EQ(max_abs(v.data(), 0), 0.f);
  v[2] = std::nanf("");
  EXPECT_TRUE(std::isnan(max_abs(v.data(), 4)));  // so fp16_scale_for gives 1 and the NaN shows
}

TEST(Fp16Scale, BringsTheLargestValueIntoTheBinadeBelowTwoToTheFifteen) {
  for (float m : {1e-8f, 3e-5f, 0.7f, 1.f, 2.f, 12345.f, 32767.f, 1e9f}) {
    const float s = fp16_scale_for(m);
    EXPECT_GE(m * s, 16384.f) << m;
    EXPECT_LT(m * s, 32768.f) << m;
    int exponent;
    EXPECT_EQ(std::frexp(s, &exponent), 0.5f) << "a power of two: " << s;
  }
  EXPECT_EQ(fp16_scale_for(0.f), 1.f);
  EXPECT_EQ(fp16_scale_for(INFINITY), 1.f);
  // Below 2^-112 the binade's scale would overflow: the largest finite one, so zeros stay zeros.
  for (float m : {0x1p-113f, 1e-36f, 1e-45f}) {
    EXPECT_EQ(fp16_scale_for(m), 0x1p127f) << m;
    EXPECT_EQ(0.f * fp16_scale_for(m), 0.f) << m;
  }
}

}  // namespace
}  // namespace cgdp
