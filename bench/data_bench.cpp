// Data-layer speed: how fast the loader hands out batches (it must never be what a GPU waits
// on), with a memcpy of the same bytes as the reference, and the one-off cost of reading IDX.
#include <benchmark/benchmark.h>

#include <cstring>
#include <filesystem>
#include <vector>

#include "cgdp/data/batch_loader.hpp"
#include "cgdp/data/idx_dataset.hpp"
#include "cgdp/data/synthetic_dataset.hpp"

namespace cgdp {
namespace {

constexpr const char* kFashionMnist = "/usr/share/datasets/fashion-mnist";

void consume(benchmark::State& state, std::shared_ptr<const Dataset> data, int64_t batch,
             int threads = 1) {
  BatchLoader loader(std::move(data), {.global_batch = batch, .seed = 1, .threads = threads});
  const int64_t bytes = batch * (loader.dataset().sample_elements() + 1) * sizeof(float);
  for (auto _ : state) benchmark::DoNotOptimize(loader.next().images);
  state.SetBytesProcessed(state.iterations() * bytes);
  state.SetItemsProcessed(state.iterations() * batch);  // samples
}

void BM_LoaderFashionMnist(benchmark::State& state) {
  if (!std::filesystem::exists(kFashionMnist)) return state.SkipWithError("no Fashion-MNIST");
  static auto data =
      std::make_shared<InMemoryDataset>(load_idx_dataset(kFashionMnist, Split::Train));
  consume(state, data, state.range(0));
}
BENCHMARK(BM_LoaderFashionMnist)->Arg(64)->Arg(256)->UseRealTime();

void BM_LoaderSynthetic224(benchmark::State& state) {
  consume(state, std::make_shared<SyntheticDataset>(SyntheticSpec{3, 224, 224, 1000, 10000, 1}),
          state.range(0), static_cast<int>(state.range(1)));
}
BENCHMARK(BM_LoaderSynthetic224)
    ->ArgNames({"batch", "threads"})
    ->Args({32, 1})
    ->Args({32, 4})
    ->UseRealTime();

// Reference: copying the bytes of one batch of 3x224x224 floats.
void BM_MemcpyReference(benchmark::State& state) {
  const size_t bytes = state.range(0) * 3 * 224 * 224 * sizeof(float);
  std::vector<char> src(bytes, 1), dst(bytes);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), bytes);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * bytes);
}
BENCHMARK(BM_MemcpyReference)->Arg(32)->UseRealTime();

void BM_LoadFashionMnistTrain(benchmark::State& state) {
  if (!std::filesystem::exists(kFashionMnist)) return state.SkipWithError("no Fashion-MNIST");
  for (auto _ : state) benchmark::DoNotOptimize(load_idx_dataset(kFashionMnist, Split::Train));
}
BENCHMARK(BM_LoadFashionMnistTrain)->Unit(benchmark::kMillisecond)->Iterations(3);

}  // namespace
}  // namespace cgdp

BENCHMARK_MAIN();
