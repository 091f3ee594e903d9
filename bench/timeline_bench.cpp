// Cost of recording one trace event, disabled and enabled, alone and with two threads contending,
// against reading the steady clock (which every recorded span pays twice).
#include <benchmark/benchmark.h>

#include <memory>

#include "cgdp/trace/timeline.hpp"

namespace {

// Fixed iterations bound the memory the recorded events take (about 200 bytes each).
constexpr int64_t kEvents = 1 << 17;

std::unique_ptr<cgdp::Timeline> shared_timeline;

void BM_TimelineAdd(benchmark::State& state) {
  if (state.thread_index() == 0) shared_timeline = std::make_unique<cgdp::Timeline>(state.range(0));
  const int pid = state.thread_index();
  int64_t t = 0;
  for (auto _ : state) {
    shared_timeline->add(pid, "compute", "fwd", "compute", t, t + 1);
    ++t;
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_TimelineScopeWithArgs(benchmark::State& state) {
  cgdp::Timeline timeline(state.range(0));
  for (auto _ : state) {
    cgdp::Timeline::Scope scope(timeline, 0, "d2h", "chunk", "copy", {{"bytes", 4096}});
  }
  state.SetItemsProcessed(state.iterations());
}

// Reference: one steady-clock read.
void BM_NowUs(benchmark::State& state) {
  cgdp::Timeline timeline(true);
  for (auto _ : state) benchmark::DoNotOptimize(timeline.now_us());
  state.SetItemsProcessed(state.iterations());
}

BENCHMARK(BM_TimelineAdd)
    ->ArgName("enabled")
    ->Arg(0)
    ->Arg(1)
    ->Threads(1)
    ->Threads(2)
    ->Iterations(kEvents)
    ->UseRealTime();
BENCHMARK(BM_TimelineScopeWithArgs)->ArgName("enabled")->Arg(0)->Arg(1)->Iterations(kEvents);
BENCHMARK(BM_NowUs);

}  // namespace

BENCHMARK_MAIN();
