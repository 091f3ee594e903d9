// The CGDP pipeline's behaviour in time (from the timeline) and under failure: sums overlap the
// backward of later layers on every worker; no chunk comes back before every worker sent it;
// a device that fails mid-run stops the whole run with an error naming it, without hanging.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <future>
#include <map>

#include "cgdp/train/trainer.hpp"

namespace cgdp {
namespace {

TrainConfig pipeline_config(int devices) {
  TrainConfig c;
  c.model = "fashion_cnn";
  c.data = "synthetic";
  c.batch = 16;
  c.devices = devices;
  c.sync = "cgdp";
  c.chunk = "layer";
  c.iterations = 4;
  c.test_interval = -1;
  c.test_samples = 8;
  c.test_batch = 8;
  c.solver.set_base_lr(0.01f);
  c.plain_output = true;
  return c;
}

std::vector<TraceEvent> run_with_timeline(const TrainConfig& base) {
  TrainConfig c = base;
  c.timeline_path = (std::filesystem::temp_directory_path() / cat("cgdp_pipeline_", ::getpid(), ".json")).string();
  FILE* sink = std::fopen("/dev/null", "w");
  Trainer t(c, sink);
  t.run();
  std::fclose(sink);
  std::filesystem::remove(c.timeline_path);
  return t.timeline().events();
}

bool overlaps(const TraceEvent& a, const TraceEvent& b) {
  return a.begin_us < b.end_us && b.begin_us < a.end_us;
}

TEST(CgdpPipeline, SomeChunkSumRunsWhileEveryWorkerComputesBackward) {
  const int workers = 2;  // on 2 cores, more workers than cores would make overlap a matter of luck
  TrainConfig c = pipeline_config(workers);
  c.batch = 48;  // a long conv2 backward for ip1's and ip2's sums to hide behind
  c.iterations = 6;
  const auto events = run_with_timeline(c);
  bool found = false;
  for (const TraceEvent& sum : events) {
    if (sum.pid != Timeline::kAggregatorPid || sum.category != "sum") continue;
    int busy = 0;
    for (int w = 0; w < workers; ++w)
      busy += std::any_of(events.begin(), events.end(), [&](const TraceEvent& e) {
        return e.pid == w && e.category == "backward" && overlaps(e, sum);
      });
    if (busy == workers) found = true;
  }
  EXPECT_TRUE(found) << "no gradient sum overlapped a backward layer on all " << workers << " workers";
}

TEST(CgdpPipeline, NoChunkComesBackBeforeEveryWorkerSentIt) {
  const int workers = 3;
  const auto events = run_with_timeline(pipeline_config(workers));
  // [direction][worker][chunk name] -> events in time order (one per iteration)
  std::map<std::string, std::map<int, std::map<std::string, std::vector<TraceEvent>>>> copies;
  for (const TraceEvent& e : events)
    if (e.category == "d2h" || e.category == "h2d") {
      std::string chunk = e.name.substr(4);  // "d2h chunk 3" -> "chunk 3"
      copies[e.category][e.pid][chunk].push_back(e);
    }
  ASSERT_FALSE(copies["d2h"].empty());
  int checked = 0;
  for (auto& [chunk, first_worker_d2h] : copies["d2h"][0]) {
    for (size_t it = 0; it < first_worker_d2h.size(); ++it) {
      int64_t last_sent = 0, first_back = INT64_MAX;
      for (int w = 0; w < workers; ++w) {
        auto& d = copies["d2h"][w][chunk];
        auto& h = copies["h2d"][w][chunk];
        std::sort(d.begin(), d.end(), [](auto& a, auto& b) { return a.begin_us < b.begin_us; });
        std::sort(h.begin(), h.end(), [](auto& a, auto& b) { return a.begin_us < b.begin_us; });
        ASSERT_EQ(d.size(), first_worker_d2h.size());
        ASSERT_EQ(h.size(), d.size()) << chunk;
        last_sent = std::max(last_sent, d[it].end_us);
        first_back = std::min(first_back, h[it].begin_us);
      }
      EXPECT_LE(last_sent, first_back) << chunk << ", iteration " << it;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 4 * 4);  // 4 param layers, 4 iterations
}

// Two sum lanes train to the same bits as one (each chunk's sum is per element in a fixed order),
// with the lanes' sums on tracks of their own; more lanes than summing threads is refused.
TEST(CgdpPipeline, SumLanesTrainToTheSameBitsAndNeedAThreadEach) {
  TrainConfig c = pipeline_config(3);
  c.host_threads = 2;
  FILE* sink = std::fopen("/dev/null", "w");
  auto trained = [&](int lanes) {
    TrainConfig with = c;
    with.sum_lanes = lanes;
    Trainer t(with, sink);
    t.run();
    std::vector<float> values(t.net().learnable_count());
    t.net().device().copy(values.data(), t.net().flat_data().data(), values.size() * sizeof(float));
    return values;
  };
  const std::vector<float> one = trained(1);
  EXPECT_EQ(trained(2), one);
  c.sum_lanes = 3;
  try {
    Trainer t(c, sink);
    ADD_FAILURE() << "3 lanes on 2 host threads were accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--sum-lanes 3: expected 1 to the 2 host summing threads"),
              std::string::npos)
        << e.what();
  }
  std::fclose(sink);
  c.sum_lanes = 2;
  bool second_lane = false;
  for (const TraceEvent& e : run_with_timeline(c)) second_lane |= e.track == "sum lane 1";
  EXPECT_TRUE(second_lane) << "no sum on the second lane's track";
}

// Runs a training whose worker 1 fails its copies; returns the error, or "" if none.
std::string failing_run(const std::string& sync, int64_t after_copies) {
  TrainConfig c = pipeline_config(3);
  c.sync = sync;
  c.iterations = 10;
  c.fail_worker = 1;
  c.fail_after_copies = after_copies;
  auto result = std::async(std::launch::async, [c] {
    FILE* sink = std::fopen("/dev/null", "w");
    std::string error;
    try {
      Trainer t(c, sink);
      t.run();
    } catch (const Error& e) {
      error = e.what();
    }
    std::fclose(sink);
    return error;
  });
  if (result.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
    ADD_FAILURE() << "the run hung after a device failure";
    std::abort();  // a hung worker would keep the process alive; end it loudly
  }
  return result.get();
}

TEST(CgdpPipeline, DeviceFailureStopsEveryWorkerWithTheDeviceNamed) {
  for (int64_t after : {0, 5, 23}) {
    const std::string msg = failing_run("cgdp", after);
    EXPECT_NE(msg.find("worker 1 (cpu:1)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("iteration "), std::string::npos) << msg;
    EXPECT_NE(msg.find("injected fault"), std::string::npos) << msg;
  }
}

TEST(CgdpPipeline, DeviceFailureUnderPs0StopsTheRunToo) {
  const std::string msg = failing_run("ps0", 9);
  EXPECT_NE(msg.find("(cpu:1)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("injected fault"), std::string::npos) << msg;
}

}  // namespace
}  // namespace cgdp
