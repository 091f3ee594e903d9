// The profiler on the CPU backend: a fashion_cnn profile on 1 and 2 devices covers every layer of
// the train net in order with its exact parameter bytes, and every cost has a sensible sign; the
// fits recover known latencies and bandwidths; bad options are refused naming the flag. And
// `cgdp profile`: its file reads back with read_profile; bad flags give one line and exit != 0.
#include "cgdp/cost/fits.hpp"
#include "cgdp/measure/profiler.hpp"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>

#include "cgdp/core/error.hpp"
#include "cgdp/device/cpu_device.hpp"
#include "cgdp/net/model_file.hpp"
#include "cgdp/net/net.hpp"
#include "support/run_command.hpp"
#include "support/temp_dir.hpp"
#include "support/test_paths.hpp"

namespace cgdp {
namespace {

TrainConfig fashion(int devices) {
  TrainConfig c;
  c.model = "fashion_cnn";
  c.data = "synthetic";
  c.batch = 16;
  c.devices = devices;
  c.solver.set_base_lr(0.01f);
  c.solver.set_momentum(0.9f);
  return c;
}

ProfileOptions quick() {
  ProfileOptions o;
  o.warmup = 1;
  o.iterations = 3;
  o.min_copy_bytes = 4 << 10;
  o.max_copy_bytes = 1 << 20;
  o.repeats = 3;
  return o;
}

double relative_error(double got, double want) {
  return std::abs(got - want) / std::abs(want);
}

class FashionProfile : public ::testing::TestWithParam<int> {};

TEST_P(FashionProfile, CoversEveryLayerWithSensibleCosts) {
  const int devices = GetParam();
  const Profile p = measure_profile(fashion(devices), quick());
  Net<float> net(load_model(find_model_file("fashion_cnn")), Phase::Train, default_cpu_device(), 16,
                 1);
  EXPECT_EQ(p.backend, "cpu");
  EXPECT_EQ(p.devices, devices);
  EXPECT_EQ(p.batch, 16);
  EXPECT_GE(p.host_threads, 1);
  EXPECT_EQ(p.shared_cores, omp_get_num_procs());  // CPU workers share the host's cores
  // Measured from a per-layer-chunk run against the one-chunk run: a finite factor >= 0.
  EXPECT_TRUE(std::isfinite(p.contention_factor));
  EXPECT_GE(p.contention_factor, 0);
  EXPECT_EQ(p.overlap_us_per_mb, 0);  // on shared cores the factor stands for it
  ASSERT_EQ(p.layers.size(), static_cast<size_t>(net.num_layers()));
  int64_t param_bytes = 0;
  for (int i = 0; i < net.num_layers(); ++i) {
    const LayerCost& l = p.layers[i];
    SCOPED_TRACE(l.name);
    EXPECT_EQ(l.name, net.layer(i).name());
    EXPECT_EQ(l.type, net.layer(i).type());
    const auto [begin, end] = net.layer_param_range(i);
    EXPECT_EQ(l.param_bytes, (end - begin) * 4);  // exact
    param_bytes += l.param_bytes;
    EXPECT_GE(l.forward_us, 0);
    EXPECT_GE(l.backward_us, 0);
    if (l.param_bytes > 0) {  // convolutions and inner products compute both ways
      EXPECT_GT(l.forward_us, 0);
      EXPECT_GT(l.backward_us, 0);
    }
    if (!net.needs_backward(i)) EXPECT_EQ(l.backward_us, 0);
  }
  EXPECT_EQ(param_bytes, net.learnable_count() * 4);
  for (const LinkCost& link : {p.d2h, p.h2d, p.p2p}) {
    EXPECT_GT(link.gbps, 0);
    EXPECT_TRUE(std::isfinite(link.gbps));
    EXPECT_GE(link.latency_us, 0);
  }
  EXPECT_GE(p.sync_us, 0);
  ASSERT_EQ(p.host_sum.size(), static_cast<size_t>(devices));
  for (int k = 0; k < devices; ++k) {
    EXPECT_EQ(p.host_sum[k].inputs, k + 1);
    EXPECT_GT(p.host_sum[k].gbps, 0);
  }
  EXPECT_GT(p.update_gbps, 0);
  EXPECT_GT(p.device_sum_gbps, 0);
}

INSTANTIATE_TEST_SUITE_P(Devices, FashionProfile, ::testing::Values(1, 2));

TEST(FitLink, RecoversLatencyAndBandwidth) {
  std::vector<TimedBytes> points;
  for (double bytes : {4096.0, 65536.0, 1048576.0, 16777216.0})
    points.push_back({bytes, 7.5 + bytes / 3e3});
  const LinkCost link = fit_link(points);
  EXPECT_LT(relative_error(link.latency_us, 7.5), 1e-9);
  EXPECT_LT(relative_error(link.gbps, 3.0), 1e-9);
}

TEST(FitLink, SmallCopiesFasterThanTheLineGiveZeroLatency) {
  // The 1000-byte copy ran below the line the larger ones set (in cache): no negative latency.
  const std::vector<TimedBytes> points = {{1000, 0.1}, {2000, 0.9}, {4000, 2.0}};
  const LinkCost link = fit_link(points);
  EXPECT_EQ(link.latency_us, 0);
  EXPECT_GT(link.gbps, 0);
}

TEST(FitLink, BandwidthFollowsTheLargeCopies) {
  // Cache-resident small copies at 20 GB/s, memory-bound large ones at 5 GB/s.
  std::vector<TimedBytes> points;
  for (double bytes : {4096.0, 16384.0, 65536.0}) points.push_back({bytes, 1 + bytes / 20e3});
  for (double bytes : {16777216.0, 67108864.0}) points.push_back({bytes, 1 + bytes / 5e3});
  EXPECT_LT(relative_error(fit_link(points).gbps, 5.0), 0.01);
}

TEST(FitGbps, TotalBytesOverTotalTime) {
  const std::vector<TimedBytes> points = {{1e6, 100}, {3e6, 900}};
  EXPECT_LT(relative_error(fit_gbps(points), 4e6 / 1000 / 1e3), 1e-12);
}

// fc (4000 B) and conv (400 B) with per-layer chunks: only fc's exchange runs beside a layer, so
// the 2 us the layers lost are 2 us per 0.004 MB; a faster per-layer run is noise: 0.
TEST(OverlapPerMegabyte, LossOverTheBytesBesideTheLayers) {
  const std::vector<ParamLayer> params = {{3, "fc", 0, 1000}, {1, "conv", 1000, 100}};
  EXPECT_DOUBLE_EQ(overlap_us_per_mb(params, 100, 102), 500);
  EXPECT_EQ(overlap_us_per_mb(params, 100, 99), 0);
  EXPECT_EQ(overlap_us_per_mb(std::vector<ParamLayer>{{1, "fc", 0, 1000}}, 100, 150), 0);
}

// A made-up timeline of fashion_cnn: worker 0 leaves a 5 us wait before every layer of a pass
// but the first, and each iteration one layer of its own is preempted for 100 us; worker 1 is
// faster. The layer times come from worker 0, count the waits, and add up to its median pass.
TEST(LayerCosts, CountWaitsBetweenLayersAndAddUpToTheMedianPass) {
  Net<float> net(load_model(find_model_file("fashion_cnn")), Phase::Train, default_cpu_device(), 16,
                 1);
  const int layers = net.num_layers(), iterations = 3;
  ASSERT_GE(layers, iterations + 2);
  std::vector<TraceEvent> events;
  int64_t t = 0;
  for (int k = 0; k < iterations; ++k)
    for (int w = 0; w < 2; ++w)
      for (const char* category : {"forward", "backward"}) {
        const bool forward = category == std::string("forward");
        for (int j = 0; j < layers; ++j) {
          const int i = forward ? j : layers - 1 - j;
          const bool input = net.layer(i).is_input();
          if (input && !forward) continue;
          const int64_t wait = w == 0 && j > (forward ? 1 : 0) ? 5 : 0;  // layer 0 is the input
          const int64_t spike = w == 0 && j == 2 + k ? 100 : 0;
          t += wait;
          events.push_back({w, "compute", net.layer(i).name(), category, t, t + 10 + spike, {}});
          t += 10 + spike;
        }
      }
  ASSERT_TRUE(net.layer(0).is_input());
  const std::vector<LayerCost> costs = layer_costs_from_timeline(net, events, 0, iterations, 2);
  ASSERT_EQ(static_cast<int>(costs.size()), layers);
  double forward = 0, backward = 0;
  for (const LayerCost& c : costs) forward += c.forward_us, backward += c.backward_us;
  // Worker 0's pass: the input's 10, the first layer's 10, 15 for each later one, one spike.
  EXPECT_NEAR(forward, 10 + 10 + 15 * (layers - 2) + 100, 1e-6);
  EXPECT_NEAR(backward, 10 + 15 * (layers - 2) + 100, 1e-6);  // the input has no backward
  EXPECT_NEAR(costs[2].forward_us / costs[1].forward_us, 1.5, 1e-9);  // the wait is counted
  EXPECT_NEAR(costs[1].forward_us / costs[0].forward_us, 1.0, 1e-9);
  EXPECT_NEAR(costs[layers - 2].backward_us / costs[layers - 1].backward_us, 1.5, 1e-9);
}

TEST(Median, OddAndEvenCounts) {
  EXPECT_EQ(median({3, 1, 2}), 2);
  EXPECT_EQ(median({4, 1, 3, 2}), 2.5);
  EXPECT_EQ(median({5}), 5);
}

TEST(ProfileOptions, BadValuesNameTheFlag) {
  auto error_of = [](ProfileOptions o) -> std::string {
    try {
      measure_profile(fashion(1), o);
    } catch (const UsageError& e) {
      return e.what();
    }
    return "";
  };
  ProfileOptions o = quick();
  o.iterations = 0;
  EXPECT_NE(error_of(o).find("--iterations"), std::string::npos);
  o = quick();
  o.warmup = -1;
  EXPECT_NE(error_of(o).find("--warmup"), std::string::npos);
  o = quick();
  o.repeats = 0;
  EXPECT_NE(error_of(o).find("--repeats"), std::string::npos);
}

testing::CommandResult run_cgdp(const std::string& args) {
  return testing::run_command(cat(testing::binary_dir(), "/cgdp ", args, " 2>&1"));
}

TEST(ProfileCommand, WritesAProfileThatReadsBack) {
  testing::TempDir dir;
  const std::string out = (dir / "fashion.json").string();
  const auto r = run_cgdp(cat("profile --model fashion_cnn --data synthetic --devices 2 --batch 8 ",
                              "--iterations 2 --warmup 1 --repeats 2 --out ", out));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("host sum"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("wrote " + out), std::string::npos) << r.output;
  const Profile p = read_profile(out);
  Net<float> net(load_model(find_model_file("fashion_cnn")), Phase::Train, default_cpu_device(), 8,
                 1);
  EXPECT_EQ(p.devices, 2);
  EXPECT_EQ(p.batch, 8);
  ASSERT_EQ(p.layers.size(), static_cast<size_t>(net.num_layers()));
  for (int i = 0; i < net.num_layers(); ++i) {
    EXPECT_EQ(p.layers[i].name, net.layer(i).name());
    const auto [begin, end] = net.layer_param_range(i);
    EXPECT_EQ(p.layers[i].param_bytes, (end - begin) * 4);
  }
  EXPECT_EQ(p.host_sum.size(), 2u);
}

// One line "cgdp: error: ..." naming `part`, and a non-zero exit.
void expect_one_line_error(const std::string& args, const std::string& part) {
  const auto r = run_cgdp(args);
  EXPECT_NE(r.exit_code, 0) << args;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  EXPECT_EQ(r.output.rfind("cgdp: error: ", 0), 0u) << r.output;
  EXPECT_NE(r.output.find(part), std::string::npos) << part << " in " << r.output;
}

TEST(ProfileCommand, BadFlagsGiveOneLine) {
  testing::TempDir dir;
  const std::string out = (dir / "p.json").string();
  expect_one_line_error("profile --data synthetic --devices 0 --out " + out, "--devices");
  expect_one_line_error("profile --data synthetic --iterations 0 --out " + out, "--iterations");
  expect_one_line_error("profile --data synthetic --iterations x --out " + out, "--iterations");
  expect_one_line_error("profile --data synthetic", "--out");
  expect_one_line_error("profile --data synthetic --out /nonexistent/dir/p.json",
                        "/nonexistent/dir/p.json");
  expect_one_line_error("profile --model /nonexistent/m.prototxt --out " + out,
                        "/nonexistent/m.prototxt");
}

}  // namespace
}  // namespace cgdp
