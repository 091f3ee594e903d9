// SGD update bandwidth against a memory-bound reference (memcpy of the same bytes) in one run.
#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

#include "cgdp/solver/update_rule.hpp"

namespace {

// The update reads data, diff and history and writes data and history: 5 floats per element.
constexpr int64_t kBytesPerElement = 5 * sizeof(float);

void BM_SgdUpdate(benchmark::State& state) {
  const size_t n = state.range(0);
  std::vector<float> data(n, 1.f), diff(n, 1e-3f), history(n, 0.f);
  for (auto _ : state) {
    cgdp::sgd_update(data, diff, history, 0.01f, 0.9f, 5e-4f);
    benchmark::DoNotOptimize(data.data());
  }
  state.SetBytesProcessed(state.iterations() * n * kBytesPerElement);
}

// Reference: copying the same number of bytes (half read, half written).
void BM_MemcpyReference(benchmark::State& state) {
  const size_t bytes = state.range(0) * kBytesPerElement / 2;
  std::vector<char> src(bytes, 1), dst(bytes);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), bytes);
    benchmark::DoNotOptimize(dst.data());
  }
  state.SetBytesProcessed(state.iterations() * bytes * 2);
}

BENCHMARK(BM_SgdUpdate)->Arg(1 << 12)->Arg(1 << 16)->Arg(1 << 20)->Arg(1 << 24)->UseRealTime();
BENCHMARK(BM_MemcpyReference)
    ->Arg(1 << 12)
    ->Arg(1 << 16)
    ->Arg(1 << 20)
    ->Arg(1 << 24)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
