// Host gradient aggregation bandwidth: summing N buffers against a STREAM-like triad, all on all
// cores. Every benchmark iteration times the sum and two triads back to back (one on arrays of the
// buffers' size, one touching as many bytes as the sum), so that each ratio is taken at one moment
// of a shared machine whose speed swings within seconds; the counters are medians over the
// iterations. bench/host_aggregate_table.sh prints them.
#include <benchmark/benchmark.h>

#include <memory>
#include <vector>

#include "cgdp/sync/host_sum.hpp"
#include "paired_timing.hpp"

namespace {

using cgdp::bench::median;
using cgdp::bench::seconds;

using Buffer = std::unique_ptr<float[]>;

// Pages are touched by the threads that will use them, as the summation splits them.
Buffer make_buffer(int64_t n, float value) {
  Buffer buffer(new float[n]);
  float* p = buffer.get();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) p[i] = value;
  return buffer;
}

// Sums N buffers into one with the aggregator's summation. Bytes moved: N reads and one write.
class Sum {
 public:
  Sum(int sources, int64_t n) : n_(n), dst_(make_buffer(n, 0.f)) {
    for (int k = 0; k < sources; ++k) {
      sources_.push_back(make_buffer(n, 1.f + k));
      pointers_.push_back(sources_.back().get());
    }
  }
  void run() {
    cgdp::sum_buffers(dst_.get(), pointers_, n_, 0);
    benchmark::DoNotOptimize(dst_.get());
    benchmark::ClobberMemory();
  }
  int64_t bytes() const {
    return (static_cast<int64_t>(sources_.size()) + 1) * n_ * static_cast<int64_t>(sizeof(float));
  }

 private:
  int64_t n_;
  std::vector<Buffer> sources_;
  std::vector<const float*> pointers_;
  Buffer dst_;
};

// a[i] = b[i] + s * c[i] over n floats per array. Bytes moved, as STREAM counts them: 2 reads and
// one write.
class Triad {
 public:
  explicit Triad(int64_t n)
      : n_(n), a_(make_buffer(n, 0.f)), b_(make_buffer(n, 1.f)), c_(make_buffer(n, 2.f)) {}
  void run() {
    float* pa = a_.get();
    const float* pb = b_.get();
    const float* pc = c_.get();
    const float s = 3.f;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n_; ++i) pa[i] = pb[i] + s * pc[i];
    benchmark::DoNotOptimize(pa);
    benchmark::ClobberMemory();
  }
  int64_t bytes() const {
    return 3 * n_ * static_cast<int64_t>(sizeof(float));
  }

 private:
  int64_t n_;
  Buffer a_, b_, c_;
};

// Seconds per run in steady state: two untimed runs, then the mean of three timed ones, so each
// kernel works from the cache state its own repetitions leave (as when it runs alone), not the
// one the kernel before it left.
template <typename Kernel>
double timed(Kernel& kernel) {
  constexpr int kWarm = 2, kTimed = 3;
  for (int i = 0; i < kWarm; ++i) kernel.run();
  const double total = seconds([&] {
    for (int i = 0; i < kTimed; ++i) kernel.run();
  });
  return total / kTimed;
}

// Args: N, bytes per summed buffer. The same-footprint triad's three arrays touch as many bytes as
// the sum's N + 1 buffers, so both run from the same level of the memory hierarchy (a 4 MiB sum of
// 8 buffers streams 36 MiB, past the cache that holds a 4 MiB triad's 12 MiB). Counters: each
// kernel's GB/s (median over iterations) and the medians of the sum's rate over each triad's in
// the same iteration: `ratio` (same size) and `ratio_fp` (same footprint).
void BM_SumVsTriads(benchmark::State& state) {
  const int sources = static_cast<int>(state.range(0));
  const int64_t n = state.range(1) / static_cast<int64_t>(sizeof(float));
  Sum sum(sources, n);
  Triad same_size(n), same_footprint((sources + 1) * n / 3);
  std::vector<double> sum_gbs, triad_gbs, footprint_gbs, ratios, ratios_fp;
  for (auto _ : state) {
    sum_gbs.push_back(1e-9 * sum.bytes() / timed(sum));
    triad_gbs.push_back(1e-9 * same_size.bytes() / timed(same_size));
    footprint_gbs.push_back(1e-9 * same_footprint.bytes() / timed(same_footprint));
    ratios.push_back(sum_gbs.back() / triad_gbs.back());
    ratios_fp.push_back(sum_gbs.back() / footprint_gbs.back());
  }
  state.counters["sum_GB/s"] = median(sum_gbs);
  state.counters["triad_GB/s"] = median(triad_gbs);
  state.counters["footprint_triad_GB/s"] = median(footprint_gbs);
  state.counters["ratio"] = median(ratios);
  state.counters["ratio_fp"] = median(ratios_fp);
}

constexpr int64_t kKiB = 1024;
constexpr int64_t kMiB = 1024 * kKiB;
constexpr int64_t kLargest = 256 * kMiB;  // run for a few iterations only: seconds per case
const std::vector<int64_t> kSizes = {64 * kKiB, 256 * kKiB, kMiB, 4 * kMiB, 16 * kMiB, 64 * kMiB};

using benchmark::internal::Benchmark;

void sum_args(Benchmark* b, const std::vector<int64_t>& sizes) {
  b->ArgNames({"N", "bytes"});
  for (const int64_t size : sizes)
    for (const int64_t nsrc : {2, 4, 8}) b->Args({nsrc, size});
}

void sums(Benchmark* b) {
  sum_args(b, kSizes);
}
void largest_sums(Benchmark* b) {
  sum_args(b, {kLargest});
}

BENCHMARK(BM_SumVsTriads)->Apply(sums)->MinTime(0.5)->UseRealTime();
BENCHMARK(BM_SumVsTriads)->Apply(largest_sums)->Iterations(3)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
