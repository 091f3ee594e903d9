// The host aggregator on exactly representable inputs: the summed chunks that come back to every
// worker are the same bits for any chunk plan, thread count and arrival order.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <thread>

#include "cgdp/core/error.hpp"
#include "cgdp/device/cpu_device.hpp"
#include "cgdp/sync/host_aggregator.hpp"

namespace cgdp {
namespace {

struct FakeWorker {
  explicit FakeWorker(int i, int64_t n) : device(i), grads(device, n * sizeof(float)) {
    h2d = device.create_stream(cat("w", i, "-h2d"));
    d2h = device.create_stream(cat("w", i, "-d2h"));
  }
  CpuDevice device;
  DeviceBuffer grads;
  std::unique_ptr<Stream> h2d, d2h;
  float* data() { return static_cast<float*>(grads.get()); }
};

std::vector<ChunkSpan> spans_of(const std::vector<int64_t>& sizes) {
  std::vector<ChunkSpan> out;
  int64_t offset = 0;
  for (int64_t s : sizes) {
    out.push_back({offset, s});
    offset += s;
  }
  return out;
}

// Runs `iterations` exchanges; each worker's chunks arrive in a random order with random delays.
std::vector<float> exchange(int workers, const std::vector<int64_t>& chunk_sizes, int threads,
                            uint64_t order_seed, int iterations) {
  int64_t n = 0;
  for (int64_t s : chunk_sizes) n += s;
  std::vector<std::unique_ptr<FakeWorker>> fakes;
  std::vector<AggregatorWorker> agg;
  for (int w = 0; w < workers; ++w) {
    fakes.push_back(std::make_unique<FakeWorker>(w, n));
    agg.push_back({&fakes[w]->device, fakes[w]->h2d.get(), fakes[w]->data()});
  }
  Timeline timeline(false);
  HostAggregator aggregator(agg, spans_of(chunk_sizes), threads, timeline);
  std::mt19937_64 rng(order_seed);
  for (int it = 0; it < iterations; ++it) {
    for (int w = 0; w < workers; ++w)  // small integers: every partial sum is exact
      for (int64_t i = 0; i < n; ++i) fakes[w]->data()[i] = static_cast<float>((i * 7 + w * 13 + it) % 61 - 30);
    std::vector<std::pair<int, int>> arrivals;
    for (int w = 0; w < workers; ++w)
      for (int c = 0; c < aggregator.num_chunks(); ++c) arrivals.push_back({w, c});
    std::shuffle(arrivals.begin(), arrivals.end(), rng);
    for (auto [w, c] : arrivals) {
      const ChunkSpan& span = aggregator.chunk(c);
      Stream& d2h = *fakes[w]->d2h;
      const int delay = static_cast<int>(rng() % 3);
      d2h.submit([delay] { std::this_thread::sleep_for(std::chrono::microseconds(100 * delay)); });
      d2h.copy_async(aggregator.receive_buffer(w, c), fakes[w]->data() + span.offset, span.count * sizeof(float));
      d2h.launch_host_func([&aggregator, w, c] { aggregator.arrived(w, c); });
    }
    for (auto& f : fakes) f->d2h->synchronize();
    aggregator.wait_all_issued();
    for (auto& f : fakes) f->h2d->synchronize();
  }
  for (int w = 1; w < workers; ++w)
    EXPECT_EQ(0, std::memcmp(fakes[0]->data(), fakes[w]->data(), n * sizeof(float))) << "worker " << w;
  return std::vector<float>(fakes[0]->data(), fakes[0]->data() + n);
}

TEST(HostAggregator, SumIsExactAndIdenticalForAnyPlanThreadsAndArrivalOrder) {
  const int64_t n = 100003;
  for (int workers : {1, 2, 3, 4}) {
    const auto reference = exchange(workers, {n}, 1, 1, 1);
    for (int64_t i = 0; i < n; i += 997) {  // check the values themselves, not just agreement
      float want = 0;
      for (int w = 0; w < workers; ++w) want += static_cast<float>((i * 7 + w * 13) % 61 - 30);
      ASSERT_EQ(reference[i], want) << "element " << i << ", " << workers << " workers";
    }
    const std::vector<std::vector<int64_t>> plans = {{1, 2, 3, n - 6}, {50000, 50003}, {n - 1, 1},
                                                     std::vector<int64_t>(7, 1), {}};
    for (auto sizes : plans) {
      if (sizes.size() == 7) sizes.push_back(n - 7);
      if (sizes.empty()) sizes = {n};
      for (int threads : {1, 2, 3})
        for (uint64_t order : {2u, 3u}) {
          const auto got = exchange(workers, sizes, threads, order, 1);
          ASSERT_EQ(0, std::memcmp(reference.data(), got.data(), n * sizeof(float)))
              << workers << " workers, " << sizes.size() << " chunks, " << threads << " threads, order " << order;
        }
    }
  }
}

TEST(HostAggregator, ReusesItsBuffersAcrossIterations) {
  // Three iterations back to back: every one must see only its own inputs.
  const auto got = exchange(3, {10, 20, 30}, 2, 9, 3);
  for (int64_t i = 0; i < 60; ++i) {
    float want = 0;
    for (int w = 0; w < 3; ++w) want += static_cast<float>((i * 7 + w * 13 + 2) % 61 - 30);
    ASSERT_EQ(got[i], want) << i;
  }
}

}  // namespace
}  // namespace cgdp
