// Chunk plans: every --chunk form on hand-made layer lists and on real models, the paper's
// equal-size rule, the byte cap, explicit starts, error messages and the log description.
#include "cgdp/sync/chunk_plan.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>
#include <utility>

#include "cgdp/core/error.hpp"
#include "cgdp/device/cpu_device.hpp"
#include "cgdp/layers/registry.hpp"
#include "cgdp/net/model_file.hpp"
#include "cgdp/net/net.hpp"
#include "support/test_paths.hpp"

namespace cgdp {
namespace {

using ::testing::HasSubstr;
using Ranges = std::vector<std::pair<int, int>>;  // {first, last} per chunk

constexpr int64_t kMiB = 1024 * 1024 / sizeof(float);  // floats in one MiB

// Param layers in backward order with the given element counts; net layer indices descend.
std::vector<ParamLayer> make_layers(const std::vector<std::string>& names,
                                    const std::vector<int64_t>& counts) {
  std::vector<ParamLayer> layers;
  int64_t offset = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    layers.push_back({static_cast<int>(2 * (names.size() - i)), names[i], offset, counts[i]});
    offset += counts[i];
  }
  return layers;
}

std::vector<ParamLayer> five_layers() {
  return make_layers({"fc8", "fc7", "fc6", "conv2", "conv1"},
                     {1 * kMiB, 1 * kMiB, 3 * kMiB, 1 * kMiB, 1 * kMiB});
}

Ranges ranges(const ChunkPlan& plan) {
  Ranges r;
  for (const Chunk& c : plan.chunks) r.emplace_back(c.first, c.last);
  return r;
}

Ranges ranges(const std::vector<ParamLayer>& layers, const std::string& spec) {
  return ranges(make_chunk_plan(layers, spec));
}

// Chunks are non-empty runs that tile the layer list and the flat buffer in order, and each
// names the lowest net layer among its own as the one completing it.
void expect_covers(const ChunkPlan& plan, const std::vector<ParamLayer>& layers,
                   const std::string& spec) {
  SCOPED_TRACE("--chunk " + spec);
  int next_layer = 0;
  int64_t next_offset = layers.empty() ? 0 : layers.front().offset;
  for (const Chunk& c : plan.chunks) {
    ASSERT_EQ(c.first, next_layer);
    ASSERT_LE(c.first, c.last);
    ASSERT_LT(c.last, static_cast<int>(layers.size()));
    EXPECT_EQ(c.offset, next_offset);
    EXPECT_EQ(c.offset, layers[c.first].offset);
    int64_t count = 0;
    int lowest = layers[c.first].layer;
    for (int i = c.first; i <= c.last; ++i) {
      count += layers[i].count;
      lowest = std::min(lowest, layers[i].layer);
    }
    EXPECT_EQ(c.count, count);
    EXPECT_EQ(c.completing_layer, lowest);
    next_layer = c.last + 1;
    next_offset = c.offset + c.count;
  }
  EXPECT_EQ(next_layer, static_cast<int>(layers.size()));
}

TEST(ChunkPlan, LayerAndAll) {
  const auto layers = five_layers();
  EXPECT_EQ(ranges(layers, "layer"), (Ranges{{0, 0}, {1, 1}, {2, 2}, {3, 3}, {4, 4}}));
  const ChunkPlan all = make_chunk_plan(layers, "all");
  EXPECT_EQ(ranges(all), (Ranges{{0, 4}}));
  EXPECT_EQ(all.chunks[0].count, 7 * kMiB);
  EXPECT_EQ(all.chunks[0].completing_layer, 2);  // conv1, the first layer in forward order
}

// Section 4.2: floor(L/K) chunks of K from the last layer, the rest one per chunk; when K
// divides L the last K layers of the backward pass are single chunks.
TEST(ChunkPlan, EqualSizeFollowsThePaper) {
  const auto five = five_layers();
  EXPECT_EQ(ranges(five, "2"), (Ranges{{0, 1}, {2, 3}, {4, 4}}));
  EXPECT_EQ(ranges(five, "3"), (Ranges{{0, 2}, {3, 3}, {4, 4}}));
  EXPECT_EQ(ranges(five, "1"), ranges(five, "layer"));
  EXPECT_EQ(ranges(five, "5"), ranges(five, "layer"));
  EXPECT_EQ(ranges(five, "9"), ranges(five, "layer"));
  const auto six = make_layers({"f6", "f5", "f4", "f3", "f2", "f1"}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(ranges(six, "3"), (Ranges{{0, 2}, {3, 3}, {4, 4}, {5, 5}}));
  EXPECT_EQ(ranges(six, "2"), (Ranges{{0, 1}, {2, 3}, {4, 4}, {5, 5}}));
  EXPECT_EQ(ranges(six, "4"), (Ranges{{0, 3}, {4, 4}, {5, 5}}));
}

TEST(ChunkPlan, BytesCapFillsInBackwardOrder) {
  const auto layers = five_layers();  // 1, 1, 3, 1, 1 MiB
  EXPECT_EQ(ranges(layers, "bytes:2"), (Ranges{{0, 1}, {2, 2}, {3, 4}}));
  EXPECT_EQ(ranges(layers, "bytes:2.5"), (Ranges{{0, 1}, {2, 2}, {3, 4}}));
  EXPECT_EQ(ranges(layers, "bytes:4"), (Ranges{{0, 1}, {2, 3}, {4, 4}}));
  EXPECT_EQ(ranges(layers, "bytes:0.5"), ranges(layers, "layer"));
  EXPECT_EQ(ranges(layers, "bytes:7"), ranges(layers, "all"));
  EXPECT_EQ(ranges(layers, "bytes:1e3"), ranges(layers, "all"));
}

TEST(ChunkPlan, ExplicitStarts) {
  const auto layers = five_layers();
  EXPECT_EQ(ranges(layers, "2,3"), (Ranges{{0, 1}, {2, 2}, {3, 4}}));
  EXPECT_EQ(ranges(layers, "3,"), (Ranges{{0, 2}, {3, 4}}));
  EXPECT_EQ(ranges(layers, "1,2,3,4"), ranges(layers, "layer"));
  const std::vector<int64_t> starts = {2, 3};
  EXPECT_EQ(ranges(plan_from_starts(layers, starts)), ranges(layers, "2,3"));
}

TEST(ChunkPlan, EveryFormCoversTheHandMadeList) {
  const auto layers = five_layers();
  for (const char* spec : {"layer", "all", "1", "2", "3", "4", "5", "6", "bytes:0.1", "bytes:2",
                           "bytes:3", "bytes:100", "1,", "4,", "1,3", "2,4", "1,2,3,4"})
    expect_covers(make_chunk_plan(layers, spec), layers, spec);
}

TEST(ChunkPlan, NoParamLayersGiveAnEmptyPlan) {
  const std::vector<ParamLayer> none;
  for (const char* spec : {"layer", "all", "3", "bytes:1"})
    EXPECT_TRUE(make_chunk_plan(none, spec).chunks.empty()) << spec;
}

// The UsageError message for `spec` (empty if none was thrown).
std::string error_of(const std::string& spec) {
  try {
    make_chunk_plan(five_layers(), spec);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(ChunkPlan, BadSpecsNameTheOptionAndWhatWasExpected) {
  for (const char* spec : {"", "foo", "2.5", "layers", "bytes", "0x3"})
    EXPECT_THAT(error_of(spec), HasSubstr("expected 'layer', 'all', a chunk size K")) << spec;
  for (const char* spec : {"0", "-3"})
    EXPECT_THAT(error_of(spec), HasSubstr("K must be a positive integer")) << spec;
  for (const char* spec :
       {"bytes:", "bytes:0", "bytes:-1", "bytes:abc", "bytes:nan", "bytes:inf", "bytes:2MB"})
    EXPECT_THAT(error_of(spec), HasSubstr("expected bytes:MB with MB a positive number")) << spec;
  EXPECT_EQ(error_of("3,2"),
            "--chunk '3,2': chunk starts must be strictly increasing, but 2 follows 3");
  EXPECT_THAT(error_of("2,2"), HasSubstr("strictly increasing, but 2 follows 2"));
  EXPECT_EQ(error_of("0,2"),
            "--chunk '0,2': chunk start 0 is out of range: starts must lie in 1..4 (5 param "
            "layers)");
  EXPECT_THAT(error_of("2,5"), HasSubstr("chunk start 5 is out of range: starts must lie in 1..4"));
  EXPECT_THAT(error_of("2,,3"), HasSubstr("'' is not an integer; expected chunk starts"));
  EXPECT_THAT(error_of("a,b"), HasSubstr("'a' is not an integer"));
  for (const char* spec : {"foo", "0", "bytes:0", "3,2", "0,2"})
    EXPECT_THAT(error_of(spec), HasSubstr(std::string("--chunk '") + spec + "'"));
}

TEST(ChunkPlan, DescribeForLogs) {
  const auto layers = five_layers();
  EXPECT_EQ(describe(make_chunk_plan(layers, "2,3"), layers),
            "3 chunks: [fc8 fc7] [fc6] [conv2 conv1]");
  EXPECT_EQ(describe(make_chunk_plan(layers, "all"), layers), "1 chunk: [fc8..conv1]");
  EXPECT_EQ(describe(make_chunk_plan(layers, "layer"), layers, 4),
            "5 chunks: [fc8] [fc7] ... [conv2] [conv1]");
  EXPECT_EQ(describe(make_chunk_plan(layers, "layer"), layers, 5),
            "5 chunks: [fc8] [fc7] [fc6] [conv2] [conv1]");
}

// Real models, batch 1. Skipped while a layer type they use is not registered yet.
void check_model(const std::string& file) {
  const proto::NetParameter model = load_model(std::string(testing::source_dir()) + "/models/" + file);
  const std::vector<std::string> known = known_layer_types();
  for (const auto& lp : model.layer())
    if (!std::binary_search(known.begin(), known.end(), lp.type()))
      GTEST_SKIP() << file << " needs layer type " << lp.type() << ", not registered yet";
  Net<float> net(model, Phase::Train, default_cpu_device(), 1, 1);
  const std::vector<ParamLayer> layers = param_layers(net);

  int64_t offset = 0;
  std::set<int> listed;
  for (const ParamLayer& p : layers) {
    EXPECT_EQ(p.offset, offset) << p.name;
    EXPECT_EQ(net.layer_param_range(p.layer), std::make_pair(p.offset, p.offset + p.count));
    EXPECT_EQ(p.name, net.layer(p.layer).name());
    offset += p.count;
    listed.insert(p.layer);
  }
  EXPECT_EQ(offset, net.learnable_count());
  for (int i = 0; i < net.num_layers(); ++i) {
    const auto [begin, end] = net.layer_param_range(i);
    EXPECT_EQ(listed.count(i) == 1, end > begin) << net.layer(i).name();
  }

  const int n = static_cast<int>(layers.size());
  ASSERT_GE(n, 3);
  const std::string list = n > 4 ? "1,2,4," : "1,2";
  for (const std::string& spec :
       {std::string("layer"), std::string("all"), std::string("1"), std::string("2"),
        std::string("3"), std::string("7"), std::to_string(n), std::string("bytes:0.001"),
        std::string("bytes:0.5"), std::string("bytes:1000"), list})
    expect_covers(make_chunk_plan(layers, spec), layers, spec);
  const ChunkPlan equal = make_chunk_plan(layers, "2");
  EXPECT_EQ(equal.chunks.size(), static_cast<size_t>((n - 1) / 2 + (n - (n - 1) / 2 * 2)));
  EXPECT_EQ(make_chunk_plan(layers, "all").chunks[0].count, net.learnable_count());
}

// Without --chunk: per layer on the CPU backend; on CUDA, ResNet-152's 311 param layers (half of
// them small Scale layers) go out in far fewer chunks, none over the cap unless one layer is.
TEST(ChunkPlan, TheDefaultOnCudaCapsChunksInsteadOfOnePerLayer) {
  EXPECT_EQ(default_chunk_spec(DeviceKind::Cpu), "layer");
  const proto::NetParameter model = load_model(std::string(testing::source_dir()) + "/models/resnet152.prototxt");
  Net<float> net(model, Phase::Train, default_cpu_device(), 1, 1);
  const std::vector<ParamLayer> layers = param_layers(net);
  EXPECT_EQ(layers.size(), 311u);
  const std::string spec = default_chunk_spec(DeviceKind::Cuda);
  const ChunkPlan plan = make_chunk_plan(layers, spec);
  expect_covers(plan, layers, spec);
  EXPECT_LT(plan.chunks.size(), 80u);
  const int64_t cap = int64_t{kDefaultCudaChunkMiB} << 20;
  for (const Chunk& c : plan.chunks)
    EXPECT_TRUE(c.count * 4 <= cap || c.first == c.last) << c.first << ".." << c.last;
}

TEST(ChunkPlan, FashionCnn) {
  check_model("fashion_cnn.prototxt");
}

TEST(ChunkPlan, ResnetSmall) {
  check_model("resnet_small.prototxt");
}

}  // namespace
}  // namespace cgdp
