// Host gradient aggregation bandwidth: summing N buffers against a STREAM-like triad over the
// same sizes, both on all cores, in one run. bench/host_aggregate_table.sh prints their ratio.
#include <benchmark/benchmark.h>

#include <memory>
#include <vector>

#include "cgdp/sync/host_sum.hpp"

namespace {

using Buffer = std::unique_ptr<float[]>;

// Pages are touched by the threads that will use them, as the summation splits them.
Buffer make_buffer(int64_t n, float value) {
  Buffer buffer(new float[n]);
  float* p = buffer.get();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) p[i] = value;
  return buffer;
}

// Args: number of sources N, bytes per buffer. Bytes counted: N reads and one write.
void BM_HostSum(benchmark::State& state) {
  const int nsrc = static_cast<int>(state.range(0));
  const int64_t bytes = state.range(1);
  const int64_t n = bytes / static_cast<int64_t>(sizeof(float));
  std::vector<Buffer> sources;
  std::vector<const float*> pointers;
  for (int k = 0; k < nsrc; ++k) {
    sources.push_back(make_buffer(n, 1.f + k));
    pointers.push_back(sources.back().get());
  }
  const Buffer dst = make_buffer(n, 0.f);
  for (auto _ : state) {
    cgdp::sum_buffers(dst.get(), pointers, n, 0);
    benchmark::DoNotOptimize(dst.get());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * (nsrc + 1) * bytes);
}

// a[i] = b[i] + s * c[i] over n floats per array; bytes counted as STREAM does: 2 reads, 1 write.
void run_triad(benchmark::State& state, int64_t n) {
  const Buffer a = make_buffer(n, 0.f), b = make_buffer(n, 1.f), c = make_buffer(n, 2.f);
  float* pa = a.get();
  const float* pb = b.get();
  const float* pc = c.get();
  const float s = 3.f;
  for (auto _ : state) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) pa[i] = pb[i] + s * pc[i];
    benchmark::DoNotOptimize(pa);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 3 * n * static_cast<int64_t>(sizeof(float)));
}

// Arg: bytes per array, the same as one summed buffer.
void BM_Triad(benchmark::State& state) {
  run_triad(state, state.range(0) / static_cast<int64_t>(sizeof(float)));
}

// Args: N, bytes per summed buffer. The triad's three arrays touch as many bytes as the sum's N + 1
// buffers, so both run from the same level of the memory hierarchy (a 4 MiB sum of 8 buffers
// streams 36 MiB, past the cache that holds a 4 MiB triad's 12 MiB).
void BM_TriadSameFootprint(benchmark::State& state) {
  const int64_t footprint = (state.range(0) + 1) * state.range(1);
  run_triad(state, footprint / 3 / static_cast<int64_t>(sizeof(float)));
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

void triad_args(Benchmark* b, const std::vector<int64_t>& sizes) {
  b->ArgNames({"bytes"});
  for (const int64_t size : sizes) b->Arg(size);
}

void sums(Benchmark* b) {
  sum_args(b, kSizes);
}
void largest_sums(Benchmark* b) {
  sum_args(b, {kLargest});
}
void triads(Benchmark* b) {
  triad_args(b, kSizes);
}
void largest_triads(Benchmark* b) {
  triad_args(b, {kLargest});
}

BENCHMARK(BM_HostSum)->Apply(sums)->MinTime(0.2)->UseRealTime();
BENCHMARK(BM_HostSum)->Apply(largest_sums)->Iterations(3)->UseRealTime();
BENCHMARK(BM_Triad)->Apply(triads)->MinTime(0.2)->UseRealTime();
BENCHMARK(BM_Triad)->Apply(largest_triads)->Iterations(3)->UseRealTime();
BENCHMARK(BM_TriadSameFootprint)->Apply(sums)->MinTime(0.2)->UseRealTime();
BENCHMARK(BM_TriadSameFootprint)->Apply(largest_sums)->Iterations(3)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
