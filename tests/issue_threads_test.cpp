// One issuing thread per worker: every worker's work runs on its own bound thread, errors come
// back after all have finished, and training issued that way gives the bits of one thread
// issuing every worker in turn (cgdp and ps0, gradient accumulation, 4 workers), with the
// timeline naming each worker's own thread.
#include "cgdp/train/issue_threads.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <stdexcept>
#include <thread>

#include "cgdp/core/error.hpp"
#include "cgdp/train/trainer.hpp"

namespace cgdp {
namespace {

TEST(IssueThreads, EachWorkerRunsOnItsOwnThreadBoundOnce) {
  const int n = 4;
  std::vector<std::thread::id> bound(n), ran(n);
  std::atomic<int> binds{0};
  {
    IssueThreads threads(n, true, [&](int w) {
      bound[w] = std::this_thread::get_id();
      ++binds;
    });
    EXPECT_TRUE(threads.parallel());
    for (int round = 0; round < 3; ++round) {
      threads.run([&](int w) {
        if (round > 0) EXPECT_EQ(ran[w], std::this_thread::get_id()) << "worker " << w << " moved thread";
        ran[w] = std::this_thread::get_id();
      });
    }
  }
  EXPECT_EQ(binds.load(), n);
  std::set<std::thread::id> distinct(ran.begin(), ran.end());
  EXPECT_EQ(distinct.size(), static_cast<size_t>(n));
  EXPECT_EQ(distinct.count(std::this_thread::get_id()), 0u);
  EXPECT_EQ(bound, ran);  // the work runs where the device was bound
}

TEST(IssueThreads, TheWorkersRunAtOnce) {
  // Each worker waits until all have started: issued in turn, this would never finish.
  const int n = 4;
  IssueThreads threads(n, true, nullptr);
  std::atomic<int> started{0};
  threads.run([&](int) {
    ++started;
    while (started.load() < n) std::this_thread::yield();
  });
  EXPECT_EQ(started.load(), n);
}

TEST(IssueThreads, OneThreadRunsEveryWorkerInTurnOnTheCaller) {
  IssueThreads threads(3, false, nullptr);
  EXPECT_FALSE(threads.parallel());
  std::vector<int> order;
  const std::thread::id caller = std::this_thread::get_id();
  threads.run([&](int w) {
    EXPECT_EQ(std::this_thread::get_id(), caller);
    order.push_back(w);
  });
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2}));
}

TEST(IssueThreads, TheLowestFailingWorkerIsRethrownAfterEveryWorkerFinished) {
  IssueThreads threads(4, true, nullptr);
  std::atomic<int> finished{0};
  try {
    threads.run([&](int w) {
      if (w == 3 || w == 1) throw std::runtime_error(cat("worker ", w));
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      ++finished;
    });
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "worker 1");
  }
  EXPECT_EQ(finished.load(), 2);
  // The threads survive a failure: the next run works.
  std::atomic<int> ran{0};
  threads.run([&](int) { ++ran; });
  EXPECT_EQ(ran.load(), 4);
}

TEST(IssueThreads, ABindFailureIsReportedByEveryRun) {
  IssueThreads threads(2, true, [](int w) {
    if (w == 1) throw DeviceError("cuda:1: no such device");
  });
  for (int round = 0; round < 2; ++round)
    EXPECT_THROW(threads.run([](int) {}), DeviceError);
}

class IssueThreadsTraining : public ::testing::TestWithParam<std::string> {
 protected:
  static TrainConfig config(const std::string& sync, const std::string& issue) {
    TrainConfig c;
    c.model = "resnet_small";  // BatchNorm state, many layers and chunks
    c.data = "synthetic";
    c.devices = 4;
    c.batch = 4;
    c.accumulate = 2;
    c.iterations = 3;
    c.test_batch = 8;
    c.test_samples = 8;
    c.test_interval = -1;
    c.sync = sync;
    c.issue_threads = issue;
    c.record_timeline = true;
    c.solver.set_base_lr(0.02f);
    c.solver.set_momentum(0.9f);
    c.seed = 5;
    c.plain_output = true;
    return c;
  }
  struct Run {
    std::vector<float> params;                     // every worker's, then worker 0's state
    std::map<int, std::set<int64_t>> issuers;      // worker -> threads that issued it
  };
  static Run train(const TrainConfig& c) {
    FILE* sink = std::fopen("/dev/null", "w");
    Trainer t(c, sink);
    t.run();
    Run r;
    for (int w = 0; w < t.num_workers(); ++w) {
      Net<float>& net = t.worker_net(w);
      const size_t at = r.params.size();
      r.params.resize(at + static_cast<size_t>(net.learnable_count()));
      net.device().copy(r.params.data() + at, net.flat_data().data(), net.learnable_count() * sizeof(float));
    }
    for (auto& [name, blob] : t.net().state_blobs()) {
      const size_t at = r.params.size();
      r.params.resize(at + static_cast<size_t>(blob->count()));
      t.net().device().copy(r.params.data() + at, blob->data(), blob->bytes());
    }
    for (const TraceEvent& e : t.timeline().events())
      if (e.category == "issue") r.issuers[e.pid].insert(std::get<int64_t>(e.args.at(0).value));
    std::fclose(sink);
    return r;
  }
};

TEST_P(IssueThreadsTraining, PerWorkerThreadsGiveTheBitsOfOneThread) {
  const Run one = train(config(GetParam(), "one"));
  const Run per_worker = train(config(GetParam(), "per-worker"));
  ASSERT_EQ(one.params.size(), per_worker.params.size());
  size_t differing = 0;
  for (size_t i = 0; i < one.params.size(); ++i)
    differing += std::memcmp(&one.params[i], &per_worker.params[i], 4) != 0;
  EXPECT_EQ(differing, 0u) << "of " << one.params.size() << " values";

  // One thread issued everything...
  ASSERT_EQ(one.issuers.size(), 4u);
  std::set<int64_t> all;
  for (const auto& [w, ids] : one.issuers) all.insert(ids.begin(), ids.end());
  EXPECT_EQ(all.size(), 1u);
  EXPECT_EQ(*all.begin(), issuing_thread_id());
  // ...or each worker its own, the same one every micro-batch.
  ASSERT_EQ(per_worker.issuers.size(), 4u);
  all.clear();
  for (const auto& [w, ids] : per_worker.issuers) {
    EXPECT_EQ(ids.size(), 1u) << "worker " << w;
    all.insert(ids.begin(), ids.end());
  }
  EXPECT_EQ(all.size(), 4u);
  EXPECT_EQ(all.count(issuing_thread_id()), 0u);
}

INSTANTIATE_TEST_SUITE_P(Schemes, IssueThreadsTraining, ::testing::Values("cgdp", "ps0"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace cgdp
