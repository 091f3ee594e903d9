// The host aggregator on exactly representable inputs: the summed chunks that come back to every
// worker are the same bits for any chunk plan, thread count, lane count, arrival order and piece
// size; with a reducer (scale-out) it keeps summing and pushing while earlier pulls wait, and
// what is pulled comes back.
#include <gtest/gtest.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <map>
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

// `count` fake workers of n gradients each, and what the aggregator needs of them.
struct FakeWorkers {
  FakeWorkers(int count, int64_t n) {
    for (int w = 0; w < count; ++w) {
      fakes.push_back(std::make_unique<FakeWorker>(w, n));
      agg.push_back({&fakes[w]->device, fakes[w]->h2d.get(), fakes[w]->data()});
    }
  }
  std::vector<std::unique_ptr<FakeWorker>> fakes;
  std::vector<AggregatorWorker> agg;
};

std::vector<ChunkSpan> spans_of(const std::vector<int64_t>& sizes) {
  std::vector<ChunkSpan> out;
  int64_t offset = 0;
  for (int64_t s : sizes) {
    out.push_back(whole_chunk(offset, s));
    offset += s;
  }
  return out;
}

struct Setup {
  int lanes = 1;
  ChunkReducer* reducer = nullptr;
  bool stage_pulled_sums = false;
  bool in_chunk_order = false;   // arrivals in chunk order, worker after worker, no delays
  Timeline* timeline = nullptr;  // null: none recorded
  int64_t piece_elements = 0;    // > 0: chunks copied and summed in pieces
};

// Worker w's copy of chunk c, as CgdpSync issues it: whole, then a host callback; or piece by
// piece, each recording its event, the callback after the first, then pieces_issued().
void issue_copy(HostAggregator& aggregator, int w, int c, const float* grads, Stream& d2h) {
  const auto copy = [&](const ElementRange& r) {
    d2h.copy_async(aggregator.receive_at(w, r.offset), grads + r.offset, r.count * sizeof(float));
  };
  if (aggregator.piece_elements() == 0) {
    for (const ElementRange& part : aggregator.chunk(c).parts) copy(part);
    d2h.launch_host_func([&aggregator, w, c] { aggregator.arrived(w, c); });
    return;
  }
  const std::vector<ElementRange>& pieces = aggregator.pieces(c);
  for (size_t p = 0; p < pieces.size(); ++p) {
    copy(pieces[p]);
    d2h.record(aggregator.piece_landed(w, c, static_cast<int>(p)));
    if (p == 0) d2h.launch_host_func([&aggregator, w, c] { aggregator.arrived(w, c); });
  }
  aggregator.pieces_issued(w, c);
}

// Runs `iterations` exchanges; each worker's chunks arrive in a random order with random delays.
std::vector<float> exchange(int workers, const std::vector<int64_t>& chunk_sizes, int threads,
                            uint64_t order_seed, int iterations, const Setup& setup = {}) {
  int64_t n = 0;
  for (int64_t s : chunk_sizes) n += s;
  FakeWorkers made(workers, n);
  auto& fakes = made.fakes;
  Timeline off(false);
  HostAggregator aggregator(made.agg, spans_of(chunk_sizes), threads,
                            setup.timeline ? *setup.timeline : off, setup.reducer, {}, setup.lanes);
  if (setup.stage_pulled_sums) aggregator.stage_pulled_sums();
  if (setup.piece_elements > 0) aggregator.sum_in_pieces(setup.piece_elements);
  std::mt19937_64 rng(order_seed);
  for (int it = 0; it < iterations; ++it) {
    aggregator.begin_iteration(100 + it);
    for (int w = 0; w < workers; ++w)  // small integers: every partial sum is exact
      for (int64_t i = 0; i < n; ++i) fakes[w]->data()[i] = static_cast<float>((i * 7 + w * 13 + it) % 61 - 30);
    std::vector<std::pair<int, int>> arrivals;
    for (int c = 0; c < aggregator.num_chunks(); ++c)
      for (int w = 0; w < workers; ++w) arrivals.push_back({w, c});
    if (!setup.in_chunk_order) std::shuffle(arrivals.begin(), arrivals.end(), rng);
    for (auto [w, c] : arrivals) {
      const ChunkSpan& span = aggregator.chunk(c);
      Stream& d2h = *fakes[w]->d2h;
      const int delay = setup.in_chunk_order ? 0 : static_cast<int>(rng() % 3);
      d2h.submit([delay] { std::this_thread::sleep_for(std::chrono::microseconds(100 * delay)); });
      if (setup.piece_elements > 0) {
        issue_copy(aggregator, w, c, fakes[w]->data(), d2h);
        continue;
      }
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
          const int lanes = 1 + static_cast<int>(order % 2) * 2;  // 1 or 3 lanes
          const auto got = exchange(workers, sizes, threads, order, 1, {.lanes = lanes});
          ASSERT_EQ(0, std::memcmp(reference.data(), got.data(), n * sizeof(float)))
              << workers << " workers, " << sizes.size() << " chunks, " << threads << " threads, "
              << lanes << " lanes, order " << order;
        }
    }
  }
}

// Pieces of any size (one element, a few, more than a chunk) on one lane or three: the bits of
// whole chunks, over two iterations.
TEST(HostAggregator, SumsInPiecesToTheBitsOfWholeChunks) {
  const std::vector<int64_t> plan = {1, 1000, 37, 4000};
  for (int workers : {2, 3}) {
    const auto whole = exchange(workers, plan, 2, 5, 2);
    for (int64_t piece : {1, 7, 256, 5000})
      for (int lanes : {1, 3}) {
        const auto got =
            exchange(workers, plan, 2, 5 + piece, 2, {.lanes = lanes, .piece_elements = piece});
        ASSERT_EQ(whole, got) << workers << " workers, pieces of " << piece << ", " << lanes
                              << " lanes";
      }
  }
}

// The callback after a chunk's first piece can run before its issuing thread has recorded the
// later pieces' events; summing then would read them unlanded (stale: the previous iteration's).
// Here every worker's first piece lands and calls back before any later piece is issued.
TEST(HostAggregator, InPiecesAChunkWaitsUntilEveryPieceIsIssued) {
  const int workers = 2;
  const int64_t n = 1000;
  FakeWorkers made(workers, n);
  auto& fakes = made.fakes;
  Timeline off(false);
  HostAggregator aggregator(made.agg, spans_of({n}), 1, off);
  aggregator.sum_in_pieces(100);
  ASSERT_EQ(aggregator.pieces(0).size(), 10u);
  for (int it = 0; it < 2; ++it) {
    aggregator.begin_iteration(it);
    for (int w = 0; w < workers; ++w)
      for (int64_t i = 0; i < n; ++i)
        fakes[w]->data()[i] = static_cast<float>(i % 50 + 100 * it + w);
    std::mutex mutex;
    std::condition_variable called;
    int callbacks = 0;
    for (int w = 0; w < workers; ++w) {
      Stream& d2h = *fakes[w]->d2h;
      const ElementRange first = aggregator.pieces(0)[0];
      d2h.copy_async(aggregator.receive_at(w, first.offset), fakes[w]->data(),
                     first.count * sizeof(float));
      d2h.record(aggregator.piece_landed(w, 0, 0));
      d2h.launch_host_func([&, w] {
        aggregator.arrived(w, 0);
        std::lock_guard lock(mutex);
        ++callbacks;
        called.notify_all();
      });
    }
    {
      std::unique_lock lock(mutex);
      called.wait(lock, [&] { return callbacks == workers; });
    }
    for (int w = 0; w < workers; ++w) {
      Stream& d2h = *fakes[w]->d2h;
      const std::vector<ElementRange>& pieces = aggregator.pieces(0);
      for (size_t p = 1; p < pieces.size(); ++p) {
        d2h.copy_async(aggregator.receive_at(w, pieces[p].offset),
                       fakes[w]->data() + pieces[p].offset, pieces[p].count * sizeof(float));
        d2h.record(aggregator.piece_landed(w, 0, static_cast<int>(p)));
      }
      aggregator.pieces_issued(w, 0);
    }
    aggregator.wait_all_issued();
    for (int w = 0; w < workers; ++w) {
      fakes[w]->h2d->synchronize();
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(fakes[w]->data()[i], static_cast<float>(2 * (i % 50 + 100 * it) + 1))
            << "iteration " << it << ", worker " << w << ", element " << i;
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

// Plays every other host of a cluster whose hosts all hold the same local sums: the global sum is
// `hosts` times the pushed one. A pull waits until the whole iteration was pushed, so the
// aggregator must go on summing and pushing later chunks while an earlier pull is pending.
class FakeShards final : public ChunkReducer {
 public:
  FakeShards(int chunks, int hosts) : chunks_(chunks), hosts_(hosts) {}
  void push(int64_t iteration, int chunk, const float* sum, int64_t count) override {
    std::lock_guard lock(mutex_);
    pushed_[{iteration, chunk}].assign(sum, sum + count);
    push_order_.push_back(chunk);
    changed_.notify_all();
  }
  PulledChunk pull(int64_t iteration, int chunk) override {
    std::unique_lock lock(mutex_);
    const bool all = changed_.wait_for(lock, std::chrono::seconds(20), [&] {
      return std::count_if(pushed_.begin(), pushed_.end(),
                           [&](const auto& p) { return p.first.first == iteration; }) == chunks_;
    });
    if (!all) throw RuntimeCheckError(cat("pull of chunk ", chunk, " waited for pushes that never came"));
    const std::vector<float>& mine = pushed_.at({iteration, chunk});
    // Two pieces, as a chunk split across two shards comes back.
    auto sum = std::make_shared<std::vector<float>>(mine.size());
    for (size_t i = 0; i < mine.size(); ++i) (*sum)[i] = mine[i] * static_cast<float>(hosts_);
    const int64_t half = static_cast<int64_t>(mine.size()) / 2;
    const int64_t count = static_cast<int64_t>(mine.size());
    pull_order_.push_back(chunk);
    return PulledChunk({{0, sum->data(), half}, {half, sum->data() + half, count - half}}, sum);
  }
  std::vector<int> push_order_, pull_order_;
  std::map<std::pair<int64_t, int>, std::vector<float>> pushed_;

 private:
  int chunks_, hosts_;
  std::mutex mutex_;
  std::condition_variable changed_;
};

// Both ways a pulled sum reaches the workers: read where it was received (CPU devices) and
// staged in pinned memory first (CUDA devices).
TEST(HostAggregator, ReducerGetsEveryChunkWhileEarlierPullsWaitAndItsSumComesBack) {
  const std::vector<int64_t> sizes = {5, 1000, 17, 3000};
  const auto local = exchange(2, sizes, 2, 4, 2);
  for (const bool staged : {false, true}) {
    SCOPED_TRACE(staged ? "staged in pinned memory" : "read where received");
    FakeShards shards(static_cast<int>(sizes.size()), 3);
    const auto global =
        exchange(2, sizes, 2, 4, 2, {.reducer = &shards, .stage_pulled_sums = staged});
    for (size_t i = 0; i < local.size(); ++i) ASSERT_EQ(global[i], 3 * local[i]) << i;
    EXPECT_EQ(shards.pushed_.size(), 2 * sizes.size());  // each (iteration, chunk) once
    EXPECT_TRUE(shards.pushed_.count({100, 0}) && shards.pushed_.count({101, 3}));
    EXPECT_EQ(shards.push_order_, shards.pull_order_);
  }
}

// With lanes a small chunk's sum can end before a larger one that became ready first; it is still
// pushed after it, so that every host pushes (and the shards answer) in one order.
TEST(HostAggregator, LanesPushInTheOrderTheChunksBecameReady) {
  const std::vector<int64_t> sizes = {400000, 5, 7, 300000, 3};
  FakeShards shards(static_cast<int>(sizes.size()), 2);
  const auto local = exchange(2, sizes, 3, 1, 2);
  const auto global =
      exchange(2, sizes, 3, 1, 2, {.lanes = 3, .reducer = &shards, .in_chunk_order = true});
  for (size_t i = 0; i < local.size(); i += 101) ASSERT_EQ(global[i], 2 * local[i]) << i;
  EXPECT_EQ(shards.push_order_, (std::vector<int>{0, 1, 2, 3, 4, 0, 1, 2, 3, 4}));
}

// Waits in the push of the first chunk until the timeline shows another chunk summed: only a
// second lane can do that while the first lane is still pushing.
class PushWaitsForAnotherSum final : public ChunkReducer {
 public:
  explicit PushWaitsForAnotherSum(const Timeline& timeline) : timeline_(timeline) {}
  void push(int64_t, int chunk, const float* sum, int64_t count) override {
    if (pushes_++ == 0) {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (!summed_besides(chunk) && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      saw_overlap_ = summed_besides(chunk);
    }
    pushed_[chunk].assign(sum, sum + count);
  }
  PulledChunk pull(int64_t, int chunk) override {
    auto sum = std::make_shared<std::vector<float>>(pushed_.at(chunk));
    return PulledChunk({{0, sum->data(), static_cast<int64_t>(sum->size())}}, sum);
  }
  bool saw_overlap_ = false;

 private:
  bool summed_besides(int chunk) const {
    for (const TraceEvent& e : timeline_.events())
      if (e.category == "sum" && e.name != cat("sum chunk ", chunk)) return true;
    return false;
  }
  const Timeline& timeline_;
  int pushes_ = 0;  // pushes come from one lane at a time (in turn)
  std::map<int, std::vector<float>> pushed_;
};

TEST(HostAggregator, SecondLaneSumsWhileTheFirstIsStillBusy) {
  Timeline timeline(true);
  PushWaitsForAnotherSum reducer(timeline);
  const auto local = exchange(2, {1000, 2000}, 2, 1, 1);
  const auto got =
      exchange(2, {1000, 2000}, 2, 1, 1,
               {.lanes = 2, .reducer = &reducer, .in_chunk_order = true, .timeline = &timeline});
  EXPECT_TRUE(reducer.saw_overlap_) << "no other chunk was summed while the first was pushed";
  EXPECT_EQ(local, got);
  bool second_track = false;
  for (const TraceEvent& e : timeline.events()) second_track |= e.track == "sum lane 1";
  EXPECT_TRUE(second_track) << "the second lane's sums have their own track";
}

}  // namespace
}  // namespace cgdp

namespace cgdp {
namespace {

// A chunk with a hole (a weight sent as factors inside it) sums only its parts, holds no host
// memory for the hole and leaves it alone on every worker; a factor slot gathers each worker's rows
// side by side in worker order, copies all of them to every worker's target once the last arrived,
// and then issues rebuild(w), which runs after that copy in worker w's H2D stream order.
TEST(HostAggregator, SumsOnlyAChunksPartsAndGathersFactorRowsInWorkerOrder) {
  const int workers = 3;
  const int64_t n = 30, outs = 2, ins = 3;
  std::vector<std::unique_ptr<FakeWorker>> fakes;
  std::vector<AggregatorWorker> agg;
  std::vector<DeviceBuffer> targets;
  FactorSlot slot{outs, ins, {}, {}};
  for (int w = 0; w < workers; ++w) {
    fakes.push_back(std::make_unique<FakeWorker>(w, n));
    agg.push_back({&fakes[w]->device, fakes[w]->h2d.get(), fakes[w]->data()});
    for (int64_t i = 0; i < n; ++i) fakes[w]->data()[i] = static_cast<float>(i + 100 * w);
    targets.emplace_back(fakes[w]->device, workers * (outs + ins) * sizeof(float));
    slot.targets.push_back(static_cast<float*>(targets.back().get()));
  }
  std::vector<std::vector<float>> rebuilt(workers);
  slot.rebuild = [&](int w) {
    fakes[w]->h2d->submit([&, w] {
      const auto* target = static_cast<const float*>(slot.targets[w]);
      rebuilt[w].assign(target, target + workers * (outs + ins));
    });
  };
  Timeline off(false);
  const ChunkSpan chunk{0, n, {{0, 10}, {20, 10}}};  // elements 10..19: the factored weight
  HostAggregator aggregator(agg, {chunk}, 2, off, nullptr, {}, 1, {slot});
  // The factored weight has no room in the receive buffers or the sum (VGG-16's fc layers would
  // take 480 MB of each): 20 summed elements per worker and in the sum, and the gathered rows.
  EXPECT_EQ(aggregator.pinned_bytes(),
            static_cast<int64_t>(((workers + 1) * 20 + workers * (outs + ins)) * sizeof(float)));
  std::vector<std::vector<float>> rows(workers);
  for (int w = workers - 1; w >= 0; --w) {  // the last worker's factors arrive first
    for (int64_t k = 0; k < outs + ins; ++k) rows[w].push_back(static_cast<float>(10 * w + k));
    Stream& d2h = *fakes[w]->d2h;
    d2h.copy_async(aggregator.factor_out_buffer(w, 0), rows[w].data(), outs * sizeof(float));
    d2h.copy_async(aggregator.factor_in_buffer(w, 0), rows[w].data() + outs, ins * sizeof(float));
    d2h.launch_host_func([&aggregator, w] { aggregator.factors_arrived(w, 0); });
    for (const ElementRange& part : chunk.parts)
      d2h.copy_async(aggregator.receive_at(w, part.offset), fakes[w]->data() + part.offset,
                     part.count * sizeof(float));
    d2h.launch_host_func([&aggregator, w] { aggregator.arrived(w, 0); });
  }
  for (auto& f : fakes) f->d2h->synchronize();
  aggregator.wait_all_issued();
  std::vector<float> gathered;  // [outs of w0, w1, w2][ins of w0, w1, w2]
  for (int w = 0; w < workers; ++w) gathered.insert(gathered.end(), rows[w].begin(), rows[w].begin() + outs);
  for (int w = 0; w < workers; ++w) gathered.insert(gathered.end(), rows[w].begin() + outs, rows[w].end());
  for (int w = 0; w < workers; ++w) {
    fakes[w]->h2d->synchronize();
    EXPECT_EQ(rebuilt[w], gathered) << "worker " << w;
    for (int64_t i = 0; i < n; ++i) {
      const bool hole = i >= 10 && i < 20;
      const float want = hole ? static_cast<float>(i + 100 * w) : static_cast<float>(3 * i + 300);
      ASSERT_EQ(fakes[w]->data()[i], want) << "worker " << w << ", element " << i;
    }
  }
}

}  // namespace
}  // namespace cgdp
