// Switching the cgdp chunk plan between iterations: the parameters stay bit for bit those of a
// run on one plan (the host sum is per element in a fixed order), and no pinned memory is added.
#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

#include "cgdp/train/trainer.hpp"

namespace cgdp {
namespace {

TrainConfig replan_config() {
  TrainConfig c;
  c.model = "fashion_cnn";
  c.data = "synthetic";
  c.batch = 8;
  c.devices = 3;
  c.sync = "cgdp";
  c.chunk = "layer";
  c.iterations = 6;
  c.test_interval = -1;
  c.solver.set_base_lr(0.05f);
  c.solver.set_momentum(0.9f);
  c.plain_output = true;
  return c;
}

std::vector<float> parameters(Net<float>& net) {
  std::vector<float> values(net.learnable_count());
  net.device().copy(values.data(), net.flat_data().data(), values.size() * sizeof(float));
  return values;
}

int64_t pinned_bytes(Trainer& t) {
  int64_t bytes = 0;
  for (int w = 0; w < t.num_workers(); ++w)
    bytes += t.worker_net(w).device().memory_stats().pinned_bytes;
  return bytes;
}

TEST(ChunkReplan, SwitchingPlansEveryIterationGivesTheSameBits) {
  const TrainConfig config = replan_config();
  FILE* sink = std::fopen("/dev/null", "w");
  Trainer fixed(config, sink);
  const std::vector<float> initial = parameters(fixed.net());
  for (int64_t i = 0; i < config.iterations; ++i) fixed.train_iteration();

  Trainer switching(config, sink);
  const auto& layers = switching.param_layers();
  ASSERT_GE(layers.size(), 3u);
  const int64_t middle[] = {2};
  const std::vector<ChunkPlan> plans = {
      single_chunk_plan(layers), equal_size_plan(layers, 2), plan_from_starts(layers, middle),
      per_layer_plan(layers),    equal_size_plan(layers, 3), single_chunk_plan(layers)};
  const int64_t pinned = pinned_bytes(switching);
  for (int64_t i = 0; i < config.iterations; ++i) {
    switching.set_chunk_plan(plans[i % plans.size()]);
    switching.train_iteration();
    EXPECT_EQ(pinned_bytes(switching), pinned) << "a plan switch allocated pinned memory";
  }
  std::fclose(sink);

  const std::vector<float> expected = parameters(fixed.net());
  ASSERT_NE(expected, initial) << "training did not change the parameters";
  for (int w = 0; w < switching.num_workers(); ++w) {
    const std::vector<float> got = parameters(switching.worker_net(w));
    ASSERT_EQ(got.size(), expected.size());
    int64_t differing = 0;
    for (size_t i = 0; i < got.size(); ++i) differing += got[i] != expected[i];
    EXPECT_EQ(differing, 0) << "worker " << w << ": " << differing << " of " << got.size()
                            << " parameters differ from the single-plan run";
  }
}

TEST(ChunkReplan, OtherSchemesHaveNoPlanToSwitch) {
  TrainConfig config = replan_config();
  config.sync = "ps0";
  FILE* sink = std::fopen("/dev/null", "w");
  Trainer t(config, sink);
  std::fclose(sink);
  try {
    t.set_chunk_plan(per_layer_plan(t.param_layers()));
    FAIL() << "ps0 accepted a chunk plan";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("need --sync cgdp"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace cgdp
