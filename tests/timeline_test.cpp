// The trace recorder: events from many threads, the Chrome trace JSON it writes, the up-front
// writability check, and that a disabled timeline records nothing.
#include "cgdp/trace/timeline.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "cgdp/core/error.hpp"
#include "cgdp/device/cpu_device.hpp"
#include "cgdp/io/file.hpp"
#include "cgdp/trace/stream_trace.hpp"
#include "support/temp_dir.hpp"

namespace cgdp {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;

TEST(Timeline, EventsFromManyThreadsAllAppear) {
  Timeline timeline(true);
  const int threads = 4, per_thread = 500;
  std::vector<std::thread> pool;
  for (int w = 0; w < threads; ++w)
    pool.emplace_back([&, w] {
      for (int i = 0; i < per_thread; ++i) {
        if (i % 2) {
          Timeline::Scope scope(timeline, w, "compute", cat("fwd ", i), "compute", {{"i", i}});
        } else {
          const int64_t t = timeline.now_us();
          timeline.add(w, "d2h", cat("chunk ", i), "copy", t, t + 1, {{"i", i}});
        }
      }
    });
  for (auto& t : pool) t.join();
  const auto events = timeline.events();
  ASSERT_EQ(events.size(), static_cast<size_t>(threads * per_thread));
  std::set<std::pair<int, int64_t>> seen;
  for (const auto& e : events) {
    EXPECT_LE(e.begin_us, e.end_us);
    EXPECT_EQ(e.track, std::get<int64_t>(e.args.at(0).value) % 2 ? "compute" : "d2h");
    seen.emplace(e.pid, std::get<int64_t>(e.args.at(0).value));
  }
  EXPECT_EQ(seen.size(), events.size());  // every (worker, i) exactly once
}

TEST(Timeline, NestedScopesNestInTime) {
  Timeline timeline(true);
  {
    Timeline::Scope outer(timeline, 0, "compute", "iteration", "train");
    Timeline::Scope inner(timeline, 0, "compute", "forward", "train");
  }
  const auto events = timeline.events();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].name, "forward");  // the inner scope ends first
  EXPECT_EQ(events[1].name, "iteration");
  EXPECT_LE(events[1].begin_us, events[0].begin_us);
  EXPECT_GE(events[1].end_us, events[0].end_us);
}

TEST(Timeline, WritesChromeTraceJsonWithNamedTracks) {
  Timeline timeline(true);
  timeline.add(0, "compute", "conv1 fwd", "compute", 10, 25,
               {{"layer", "conv1"}, {"bytes", size_t{4096}}, {"ratio", 0.5}});
  timeline.add(0, "d2h", "chunk 0", "copy", 30, 40);
  timeline.add(1, "compute", "conv1 fwd", "compute", 11, 20);
  timeline.add(Timeline::kAggregatorPid, "sum", "chunk 0", "sum", 41, 60, {{"workers", 2}});
  timeline.set_process_name(1, "worker 1 (cpu:1)");
  TempDir dir;
  timeline.write(dir / "trace.json");
  const auto doc = nlohmann::json::parse(read_file(dir / "trace.json"));
  ASSERT_TRUE(doc["traceEvents"].is_array());

  std::map<int, std::string> process;
  std::map<std::pair<int, int>, std::string> thread;  // (pid, tid) -> track
  auto key = [](const nlohmann::json& e) {
    return std::pair(e["pid"].get<int>(), e["tid"].get<int>());
  };
  std::vector<nlohmann::json> complete;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "X")
      complete.push_back(e);
    else if (e["name"] == "process_name")
      process[e["pid"].get<int>()] = e["args"]["name"];
    else if (e["name"] == "thread_name")
      thread[key(e)] = e["args"]["name"];
  }
  ASSERT_EQ(complete.size(), 4u);
  EXPECT_EQ(process[0], "worker 0");
  EXPECT_EQ(process[1], "worker 1 (cpu:1)");
  EXPECT_EQ(process[Timeline::kAggregatorPid], "host aggregator");
  EXPECT_EQ(thread.size(), 4u);  // worker 0: compute, d2h; worker 1: compute; aggregator: sum

  const auto& first = complete[0];
  for (const char* key : {"name", "cat", "ph", "ts", "dur", "pid", "tid", "args"})
    EXPECT_TRUE(first.contains(key)) << key;
  EXPECT_EQ(first["name"], "conv1 fwd");
  EXPECT_EQ(first["cat"], "compute");
  EXPECT_EQ(first["ts"], 10);
  EXPECT_EQ(first["dur"], 15);
  EXPECT_EQ(first["args"]["layer"], "conv1");
  EXPECT_EQ(first["args"]["bytes"], 4096);
  EXPECT_EQ(first["args"]["ratio"], 0.5);
  const std::vector<std::string> tracks = {"compute", "d2h", "compute", "sum"};
  for (size_t i = 0; i < complete.size(); ++i)
    EXPECT_EQ(thread[key(complete[i])], tracks[i]) << "event " << i;
}

TEST(Timeline, WriteToABadPathIsAnIoError) {
  EXPECT_THROW(Timeline(true).write("/nonexistent_dir/x.json"), IoError);
}

TEST(Timeline, DisabledRecordsNothing) {
  Timeline timeline(false);
  EXPECT_FALSE(timeline.enabled());
  timeline.add(0, "compute", "x", "compute", 0, 1, {{"i", 1}});
  { Timeline::Scope scope(timeline, 0, "compute", "y", "compute"); }
  EXPECT_TRUE(timeline.events().empty());
}

// Names and counts are joined only when recorded: a scope's parts come out as one name and args;
// traced() on a disabled timeline issues its work and puts nothing on the stream.
TEST(Timeline, NamesAndCountsAreBuiltWhenRecorded) {
  EXPECT_EQ(TraceName("d2h chunk ", 12).str(), "d2h chunk 12");
  EXPECT_EQ(TraceName("update").str(), "update");
  Timeline timeline(true);
  { Timeline::Scope scope(timeline, 3, "pull", {"pull chunk ", 7}, "pull", {{"chunk", 7}, {"bytes", 1 << 20}}); }
  const auto events = timeline.events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].name, "pull chunk 7");
  ASSERT_EQ(events[0].args.size(), 2u);
  EXPECT_EQ(events[0].args[1].key, "bytes");
  EXPECT_EQ(std::get<int64_t>(events[0].args[1].value), 1 << 20);

  Timeline off(false);
  auto stream = default_cpu_device().create_stream("s");
  int issued = 0;
  traced(*stream, off, 0, "compute", {"layer ", 1}, "forward", [&] { ++issued; }, {{"i", 1}});
  stream->synchronize();
  EXPECT_EQ(issued, 1);
  EXPECT_TRUE(off.events().empty());
  traced(*stream, timeline, 0, "compute", {"layer ", 1}, "forward", [&] { ++issued; }, {{"i", 1}});
  stream->synchronize();
  EXPECT_EQ(timeline.events().back().name, "layer 1");
}

}  // namespace
}  // namespace cgdp
