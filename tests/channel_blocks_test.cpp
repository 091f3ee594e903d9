// Channel-blocked activations (tensor/channel_blocks.hpp): the layout moves values, never changes
// them. Pooling from and to every block gives the plain path's bits, and so do BatchNorm, Scale
// and LRN in any block; a net whose convolutions run on oneDNN keeps their activations blocked
// and trains to the same bits as with every blob in NCHW, in fp32 and in bf16.
#include "cgdp/tensor/channel_blocks.hpp"

#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "cgdp/device/cpu_device.hpp"
#include "cgdp/device/layer_precision.hpp"
#include "cgdp/layers/batch_norm_layer.hpp"
#include "cgdp/layers/registry.hpp"
#include "cgdp/net/model_file.hpp"
#include "cgdp/net/net.hpp"

namespace cgdp {
namespace {

TEST(ChannelBlocks, OffsetsAreNchwNhwcAndBlocksOf16) {
  // N x C x H x W = 1 x 32 x 3 x 5; element (c, h, w) of the image.
  EXPECT_EQ(blocked_offset(1, 3, 5, 7, 2, 4), 7 * 15 + 2 * 5 + 4);                // NCHW
  EXPECT_EQ(blocked_offset(32, 3, 5, 7, 2, 4), (2 * 5 + 4) * 32 + 7);             // NHWC
  EXPECT_EQ(blocked_offset(16, 3, 5, 17, 2, 4), 15 * 16 + (2 * 5 + 4) * 16 + 1);  // nChw16c
  const Shape shape{2, 32, 3, 5};
  std::vector<float> plain(2 * 32 * 15), blocked(plain.size()), back(plain.size());
  for (size_t i = 0; i < plain.size(); ++i) plain[i] = static_cast<float>(i);
  reorder_channel_blocks(plain.data(), 1, blocked.data(), 16, shape);
  EXPECT_NE(blocked, plain);
  reorder_channel_blocks(blocked.data(), 16, back.data(), 1, shape);
  EXPECT_EQ(back, plain);
}

// BatchNorm's and Scale's runs reach every element once, lane l of a run at channel first + l: in
// NCHW (runs of whole planes, fewer lanes where the threads would otherwise lack runs) and in
// blocks of 8, 16 and all the channels (NHWC).
TEST(ChannelRuns, ReachEveryElementOnceInAnyBlock) {
  const int64_t images = 2, height = 3, width = 5, spatial = height * width;
  for (const int64_t channels : {1, 3, 16, 24, 40})
    for (const int64_t block : {int64_t{1}, int64_t{8}, int64_t{16}, channels})
      for (const int threads : {1, 2, 16}) {
        if (channels % block != 0) continue;
        SCOPED_TRACE(cat(channels, " channels, block ", block, ", ", threads, " threads"));
        const ChannelRuns runs(images, channels, spatial, block, threads);
        std::vector<int> reached(static_cast<size_t>(images * channels * spatial));
        for (int64_t r = 0; r < runs.count(); ++r) {
          const int64_t lanes = runs.lanes(r), first = runs.first_channel(r);
          ASSERT_GE(lanes, 1);
          ASSERT_LE(lanes, ChannelRuns::kMaxLanes);
          for (int64_t i = 0; i < images; ++i)
            for (int64_t j = 0; j < spatial; ++j)
              for (int64_t l = 0; l < lanes; ++l) {
                const int64_t e =
                    runs.at(r, i) + j * runs.position_stride() + l * runs.lane_stride();
                ASSERT_EQ(
                    e, i * channels * spatial +
                           blocked_offset(block, height, width, first + l, j / width, j % width));
                ++reached[static_cast<size_t>(e)];
              }
        }
        EXPECT_EQ(std::count(reached.begin(), reached.end(), 1),
                  static_cast<int64_t>(reached.size()));
        if (block == 1) EXPECT_GE(runs.count(), std::min<int64_t>(channels, threads));
      }
}

TEST(ChannelBlocks, ABlobKeepsItsBlockOnlyWhileTheBlockDividesItsChannels) {
  Blob<float> blob(default_cpu_device(), {2, 32, 4, 4});
  EXPECT_EQ(blob.channel_block(), 1);
  blob.set_channel_block(16);
  blob.reshape({5, 32, 4, 4});  // a new batch keeps it
  EXPECT_EQ(blob.channel_block(), 16);
  EXPECT_THROW(blob.set_channel_block(12), Error);
  blob.reshape({5, 24, 4, 4});
  EXPECT_EQ(blob.channel_block(), 1);
}

proto::LayerParameter parse_layer(const std::string& text) {
  proto::LayerParameter param;
  if (!google::protobuf::TextFormat::ParseFromString(text, &param))
    throw std::runtime_error("bad test layer text: " + text);
  return param;
}

struct PoolingRun {
  std::vector<float> top, bottom_diff;  // in NCHW, whatever the blobs' blocks
};

// One forward and backward of `pooling` on fixed inputs, with the bottom and top in these blocks
// (`forward_only`: a TEST net's layer, forward alone). Values are rounded to quarters so that
// windows hold ties: the first maximum must win.
PoolingRun pool(const std::string& pooling, int64_t in_block, int64_t out_block,
                bool forward_only = false) {
  const Shape shape{3, 32, 13, 11};
  Blob<float> bottom(default_cpu_device(), shape), top(default_cpu_device());
  auto layer = create_layer<float>(
      parse_layer("name: 'pool' type: 'Pooling' pooling_param { " + pooling + " }"),
      default_cpu_device());
  if (forward_only) layer->set_forward_only();
  Rng rng(1);
  layer->setup({&bottom}, {&top}, rng);
  std::mt19937 gen(5);
  std::uniform_int_distribution<int> quarter(-8, 8);
  std::vector<float> values(static_cast<size_t>(bottom.count())),
      grad(static_cast<size_t>(top.count()));
  for (float& v : values) v = quarter(gen) / 4.f;
  for (float& g : grad) g = quarter(gen) / 4.f + 0.1f;
  bottom.set_channel_block(in_block);
  top.set_channel_block(out_block);
  reorder_channel_blocks(values.data(), 1, bottom.mutable_data(), in_block, bottom.shape());
  layer->forward({}, {&bottom}, {&top});
  PoolingRun run{std::vector<float>(static_cast<size_t>(top.count())), {}};
  reorder_channel_blocks(top.data(), out_block, run.top.data(), 1, top.shape());
  if (forward_only) return run;
  reorder_channel_blocks(grad.data(), 1, top.mutable_diff(), out_block, top.shape());
  layer->backward({}, {&top}, {true}, {&bottom});
  run.bottom_diff.resize(static_cast<size_t>(bottom.count()));
  reorder_channel_blocks(bottom.diff(), in_block, run.bottom_diff.data(), 1, bottom.shape());
  return run;
}

class PoolingBlocks
    : public ::testing::TestWithParam<std::tuple<std::string, std::pair<int64_t, int64_t>>> {};

TEST_P(PoolingBlocks, GiveThePlainPathsBits) {
  const auto& [pooling, blocks] = GetParam();
  const PoolingRun plain = pool(pooling, 1, 1);
  const PoolingRun blocked = pool(pooling, blocks.first, blocks.second);
  EXPECT_EQ(blocked.top, plain.top);
  EXPECT_EQ(blocked.bottom_diff, plain.bottom_diff);
  int routed = 0;  // a gradient that reached no input would make the equality weak
  for (float g : plain.bottom_diff) routed += g != 0.f;
  EXPECT_GT(routed, static_cast<int>(plain.bottom_diff.size()) / 8);
}

// Device bytes a pooling layer holds after its setup on a 3 x 32 x 13 x 11 bottom.
int64_t pooling_bytes(const std::string& pooling, bool forward_only) {
  CpuDevice device(0);
  Blob<float> bottom(device, Shape{3, 32, 13, 11}), top(device);
  auto layer = create_layer<float>(
      parse_layer("name: 'pool' type: 'Pooling' pooling_param { " + pooling + " }"), device);
  if (forward_only) layer->set_forward_only();
  Rng rng(1);
  layer->setup({&bottom}, {&top}, rng);
  return device.memory_stats().device_bytes;
}

// A TEST net's pooling keeps no argmax (each thread drops its own) and pools the same; a train
// net's keeps a byte per output (its maximum's place in a window of 4 or 9: pool_window_code.hpp).
TEST_P(PoolingBlocks, ForwardOnlyPoolsTheSameKeepingNoArgmax) {
  const auto& [pooling, blocks] = GetParam();
  const PoolingRun plain = pool(pooling, 1, 1);
  EXPECT_EQ(pool(pooling, blocks.first, blocks.second, true).top, plain.top);
  const bool max = pooling.find("MAX") != std::string::npos;
  EXPECT_EQ(pooling_bytes(pooling, false) - pooling_bytes(pooling, true),
            max ? static_cast<int64_t>(plain.top.size()) : 0);
}

using Blocks = std::pair<int64_t, int64_t>;  // the bottom's, the top's

std::string pooling_case_name(const ::testing::TestParamInfo<PoolingBlocks::ParamType>& info) {
  const std::string& p = std::get<0>(info.param);
  const std::string kind = p.find("AVE") != std::string::npos              ? "Ave3x3Pad"
                           : p.find("kernel_size: 2") != std::string::npos ? "Max2x2"
                                                                           : "Max3x3Pad";
  const Blocks blocks = std::get<1>(info.param);
  return cat(kind, "_in", blocks.first, "_out", blocks.second);
}

INSTANTIATE_TEST_SUITE_P(
    InAndOutBlocks, PoolingBlocks,
    ::testing::Combine(::testing::Values("pool: MAX kernel_size: 2 stride: 2",
                                         "pool: MAX kernel_size: 3 stride: 2 pad: 1",
                                         "pool: AVE kernel_size: 3 stride: 2 pad: 1"),
                       ::testing::Values(Blocks{1, 32}, Blocks{1, 8}, Blocks{32, 1}, Blocks{16, 1},
                                         Blocks{16, 16}, Blocks{4, 32})),
    pooling_case_name);

// One training forward and backward of a layer that needs one block on its bottom and top
// (BatchNorm, Scale, LRN) with both in `block`: the top and bottom gradient in NCHW, then the
// parameters' gradients and the state (`forward_only`: a TEST net's layer, the top alone).
std::vector<float> one_block_run(const std::string& layer_text, int64_t block, const Shape& shape,
                                 bool forward_only = false) {
  Blob<float> bottom(default_cpu_device(), shape), top(default_cpu_device());
  auto layer = create_layer<float>(parse_layer(layer_text), default_cpu_device());
  if (forward_only) layer->set_forward_only();
  Rng rng(1);
  layer->setup({&bottom}, {&top}, rng);
  EXPECT_TRUE(layer->handles_channel_block(false, block));
  std::mt19937 gen(7);
  std::normal_distribution<float> normal(0.5f, 2.f);
  std::vector<float> values(static_cast<size_t>(bottom.count())), grad(values.size());
  for (float& v : values) v = normal(gen);
  for (float& g : grad) g = normal(gen);
  bottom.set_channel_block(block);
  top.set_channel_block(block);
  reorder_channel_blocks(values.data(), 1, bottom.mutable_data(), block, shape);
  layer->forward({.phase = Phase::Train}, {&bottom}, {&top});
  if (forward_only) {
    std::vector<float> out(values.size());
    reorder_channel_blocks(top.data(), block, out.data(), 1, shape);
    return out;
  }
  reorder_channel_blocks(grad.data(), 1, top.mutable_diff(), block, shape);
  layer->backward({.phase = Phase::Train}, {&top}, {true}, {&bottom});
  std::vector<float> out(2 * values.size());
  reorder_channel_blocks(top.data(), block, out.data(), 1, shape);
  reorder_channel_blocks(bottom.diff(), block, out.data() + values.size(), 1, shape);
  for (const auto& p : layer->params()) out.insert(out.end(), p->diff(), p->diff() + p->count());
  for (const auto& st : layer->state()) out.insert(out.end(), st->data(), st->data() + st->count());
  return out;
}

class OneBlockLayers : public ::testing::TestWithParam<std::tuple<std::string, int64_t>> {};

// 16: oneDNN's nChw16c; 48: NHWC, three runs of 16 channels; 24: runs of 16 and 8. LRN's planes
// of 17 x 17 take two of its tiles, the second part-filled, and its 5-channel windows cross blocks.
TEST_P(OneBlockLayers, GiveThePlainPathsBits) {
  const auto& [layer, block] = GetParam();
  const bool lrn = layer.find("LRN") != std::string::npos;
  const Shape shape = lrn ? Shape{2, 48, 17, 17} : Shape{3, 48, 5, 7};
  const std::vector<float> plain = one_block_run(layer, 1, shape);
  EXPECT_EQ(one_block_run(layer, block, shape), plain);
}

// A TEST net's LRN across channels keeps no scale (each tile's is used where it is computed) and
// gives the training forward's top, plain and in blocks.
TEST(ChannelBlocks, ForwardOnlyLrnKeepsNoScaleAndGivesTheSameTop) {
  const std::string text =
      "name: 'norm' type: 'LRN' lrn_param { local_size: 5 alpha: 0.3 beta: 0.75 k: 2 }";
  const Shape shape{2, 48, 17, 17};
  const std::vector<float> trained = one_block_run(text, 1, shape);
  const std::vector<float> top(trained.begin(), trained.begin() + count_of(shape));
  for (const int64_t block : {1, 16, 48})
    EXPECT_EQ(one_block_run(text, block, shape, true), top) << "block " << block;
  const auto setup_bytes = [&](bool forward_only) {
    CpuDevice device(0);
    Blob<float> bottom(device, shape), out(device);
    auto layer = create_layer<float>(parse_layer(text), device);
    if (forward_only) layer->set_forward_only();
    Rng rng(1);
    layer->setup({&bottom}, {&out}, rng);
    return device.memory_stats().device_bytes;
  };
  EXPECT_EQ(setup_bytes(false) - setup_bytes(true), count_of(shape) * int64_t{sizeof(float)});
}

INSTANTIATE_TEST_SUITE_P(
    BatchNormScaleAndLrn, OneBlockLayers,
    ::testing::Combine(::testing::Values("name: 'bn' type: 'BatchNorm'",
                                         "name: 'scale' type: 'Scale' scale_param { bias_term: "
                                         "true filler { type: 'gaussian' mean: 1 std: 0.3 } }",
                                         "name: 'norm' type: 'LRN' lrn_param { local_size: 5 "
                                         "alpha: 0.3 beta: 0.75 k: 2 }"),
                       ::testing::Values(int64_t{16}, int64_t{48}, int64_t{24})),
    [](const ::testing::TestParamInfo<OneBlockLayers::ParamType>& info) {
      const std::string& text = std::get<0>(info.param);
      const std::string type = text.find("BatchNorm") != std::string::npos ? "BatchNorm"
                               : text.find("LRN") != std::string::npos     ? "LRN"
                                                                           : "Scale";
      return cat(type, "_block", std::get<1>(info.param));
    });

TEST(ChannelBlocks, LrnWithinAChannelKeepsNchw) {
  Blob<float> bottom(default_cpu_device(), Shape{2, 16, 5, 5}), top(default_cpu_device());
  auto layer = create_layer<float>(
      parse_layer("name: 'norm' type: 'LRN' lrn_param { norm_region: WITHIN_CHANNEL }"),
      default_cpu_device());
  Rng rng(1);
  layer->setup({&bottom}, {&top}, rng);
  EXPECT_FALSE(layer->handles_channel_block(false, 16));
  EXPECT_TRUE(layer->handles_channel_block(false, 1));
}

// conv (8 -> 16, absorbed ReLU) -> pool -> conv (16 -> 32, absorbed ReLU) -> LRN -> pool -> ip ->
// loss: both convolutions on oneDNN, the blobs between them blocked when allowed.
constexpr const char* kNet = R"(
  layer { name: "data" type: "Input" top: "data" top: "label"
          input_param { shape { dim: 4 dim: 8 dim: 12 dim: 12 } shape { dim: 4 } } }
  layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
          convolution_param { num_output: 16 kernel_size: 3 pad: 1
                              weight_filler { type: "xavier" } bias_filler { type: "gaussian" std: 0.1 } } }
  layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }
  layer { name: "pool1" type: "Pooling" bottom: "conv1" top: "pool1"
          pooling_param { pool: MAX kernel_size: 3 stride: 2 } }
  layer { name: "conv2" type: "Convolution" bottom: "pool1" top: "conv2"
          convolution_param { num_output: 32 kernel_size: 3 pad: 1
                              weight_filler { type: "xavier" } bias_filler { type: "gaussian" std: 0.1 } } }
  layer { name: "relu2" type: "ReLU" bottom: "conv2" top: "conv2" }
  layer { name: "norm2" type: "LRN" bottom: "conv2" top: "norm2"
          lrn_param { local_size: 5 alpha: 0.001 beta: 0.75 } }
  layer { name: "pool2" type: "Pooling" bottom: "norm2" top: "pool2"
          pooling_param { pool: AVE kernel_size: 2 stride: 2 } }
  layer { name: "ip" type: "InnerProduct" bottom: "pool2" top: "ip"
          inner_product_param { num_output: 5 weight_filler { type: "xavier" } } }
  layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
)";

// A residual block and an inception-like join: conv1's output through in-place BatchNorm, Scale
// and ReLU to three convolutions (a Split), two of them summed (Eltwise), the sum and the third
// joined along the channels (Concat) into conv3. Every layer between the convolutions runs on
// blocked blobs when allowed.
constexpr const char* kJoinNet = R"(
  layer { name: "data" type: "Input" top: "data" top: "label"
          input_param { shape { dim: 4 dim: 8 dim: 6 dim: 6 } shape { dim: 4 } } }
  layer { name: "conv1" type: "Convolution" bottom: "data" top: "c1"
          convolution_param { num_output: 16 kernel_size: 3 pad: 1 weight_filler { type: "xavier" } } }
  layer { name: "bn1" type: "BatchNorm" bottom: "c1" top: "c1" }
  layer { name: "scale1" type: "Scale" bottom: "c1" top: "c1"
          scale_param { bias_term: true filler { type: "gaussian" mean: 1 std: 0.2 }
                        bias_filler { type: "gaussian" std: 0.2 } } }
  layer { name: "relu1" type: "ReLU" bottom: "c1" top: "c1" }
  layer { name: "conv2a" type: "Convolution" bottom: "c1" top: "c2a"
          convolution_param { num_output: 16 kernel_size: 1 weight_filler { type: "xavier" } } }
  layer { name: "bn2a" type: "BatchNorm" bottom: "c2a" top: "c2a" }
  layer { name: "conv2b" type: "Convolution" bottom: "c1" top: "c2b"
          convolution_param { num_output: 16 kernel_size: 3 pad: 1 weight_filler { type: "xavier" } } }
  layer { name: "sum" type: "Eltwise" bottom: "c2a" bottom: "c2b" top: "sum" }
  layer { name: "relu2" type: "ReLU" bottom: "sum" top: "sum" }
  layer { name: "conv2c" type: "Convolution" bottom: "c1" top: "c2c"
          convolution_param { num_output: 16 kernel_size: 3 pad: 1 weight_filler { type: "xavier" } } }
  layer { name: "cat" type: "Concat" bottom: "sum" bottom: "c2c" top: "cat" }
  layer { name: "conv3" type: "Convolution" bottom: "cat" top: "c3"
          convolution_param { num_output: 16 kernel_size: 3 weight_filler { type: "xavier" } } }
  layer { name: "pool" type: "Pooling" bottom: "c3" top: "pool"
          pooling_param { pool: AVE kernel_size: 2 stride: 2 } }
  layer { name: "ip" type: "InnerProduct" bottom: "pool" top: "ip"
          inner_product_param { num_output: 5 weight_filler { type: "xavier" } } }
  layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
)";

struct Training {
  std::vector<int64_t> blocks;  // each layer's top 0's channel block
  std::vector<float> params;
  double loss = 0;
  int scales_taken_over = 0;  // by a BatchNorm (Net::fuse_batch_norm_scales)
};

int scales_taken_over(Net<float>& net) {
  int count = 0;
  for (int i = 0; i < net.num_layers(); ++i)
    if (auto* bn = dynamic_cast<BatchNormLayer<float>*>(&net.layer(i)))
      count += bn->took_over_scale();
  return count;
}

// Three steps of plain SGD on fixed random data, blocks allowed or not.
Training train(bool blocks_allowed, const char* model = kNet) {
  const ScopedChannelBlocks blocks(blocks_allowed);
  Net<float> net(parse_model(model, "blocks.prototxt"), Phase::Train, default_cpu_device(), 0, 3);
  Training t;
  for (int i = 0; i < net.num_layers(); ++i) t.blocks.push_back(net.tops(i)[0]->channel_block());
  t.scales_taken_over = scales_taken_over(net);
  std::mt19937 rng(11);
  std::normal_distribution<float> normal;
  for (int step = 0; step < 3; ++step) {
    for (float& v : net.input_data().mutable_data_span()) v = normal(rng);
    float* label = net.input_label()->mutable_data();  // 4 images in both nets
    for (int n = 0; n < 4; ++n) label[n] = static_cast<float>((n + step) % 5);
    for (float& d : net.flat_diff()) d = 0;
    net.forward({});
    for (int i = net.num_layers() - 1; i >= 0; --i) net.backward_layer(i, {});
    std::span<float> data = net.flat_data();
    std::span<float> diff = net.flat_diff();
    for (size_t j = 0; j < data.size(); ++j) data[j] -= 0.05f * diff[j];
    t.loss += net.loss();
  }
  t.params.assign(net.flat_data().begin(), net.flat_data().end());
  return t;
}

void expect_blocked_training_equals_plain() {
  const Training plain = train(false);
  const Training blocked = train(true);
  for (int64_t b : plain.blocks) EXPECT_EQ(b, 1);
    // Layers: data, conv1, relu1, pool1, conv2, relu2, norm2, pool2, ip, loss.
#ifdef CGDP_HAVE_ONEDNN
  EXPECT_GT(blocked.blocks[1], 1) << "conv1's output stays in oneDNN's layout";
  EXPECT_GT(blocked.blocks[3], 1) << "pool1 writes conv2's input in its layout";
  EXPECT_GT(blocked.blocks[4], 1);
  EXPECT_EQ(blocked.blocks[6], blocked.blocks[4]) << "LRN keeps conv2's layout";
#endif
  EXPECT_EQ(blocked.blocks[0], 1) << "the input is Caffe's";
  EXPECT_EQ(blocked.blocks[7], 1) << "InnerProduct reads NCHW";
  EXPECT_EQ(blocked.loss, plain.loss);
  EXPECT_EQ(blocked.params, plain.params);
}

TEST(ChannelBlocks, BlockedNetTrainsToThePlainNetsBitsInFp32) {
  expect_blocked_training_equals_plain();
}

TEST(ChannelBlocks, BlockedNetTrainsToThePlainNetsBitsInBf16) {
  const ScopedLayerPrecision bf16(Precision::kBf16);
  expect_blocked_training_equals_plain();
}

void expect_joins_train_to_the_plain_nets_bits() {
  const Training plain = train(false, kJoinNet);
  const Training blocked = train(true, kJoinNet);
  // Layers: data, conv1, bn1, scale1, relu1, split, conv2a, bn2a, conv2b, sum, relu2, conv2c,
  // cat, conv3, pool, ip, loss.
#ifdef CGDP_HAVE_ONEDNN
  for (int layer : {1, 2, 3, 4, 5})
    EXPECT_GT(blocked.blocks[layer], 1) << "BatchNorm, Scale, ReLU and Split keep conv1's layout";
  if (blocked.blocks[6] == 16)  // oneDNN's nChw16c (AVX-512) rather than NHWC (AMX)
    for (int layer : {6, 7, 8, 9, 10, 11, 12})
      EXPECT_EQ(blocked.blocks[layer], 16) << "Eltwise and Concat join blocked blobs";
#endif
  EXPECT_EQ(blocked.blocks[15], 1) << "InnerProduct's output";
  EXPECT_EQ(blocked.loss, plain.loss);
  EXPECT_EQ(blocked.params, plain.params);
}

TEST(ChannelBlocks, BatchNormScaleEltwiseAndConcatTrainToThePlainNetsBitsInFp32) {
  expect_joins_train_to_the_plain_nets_bits();
}

TEST(ChannelBlocks, BatchNormScaleEltwiseAndConcatTrainToThePlainNetsBitsInBf16) {
  const ScopedLayerPrecision bf16(Precision::kBf16);
  expect_joins_train_to_the_plain_nets_bits();
}

TEST(ChannelBlocks, ANetOutputStaysNchw) {
  const ScopedChannelBlocks blocks(true);
  const std::string text = R"(
    layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 2 dim: 8 dim: 6 dim: 6 } } }
    layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
            convolution_param { num_output: 16 kernel_size: 3 } }
    layer { name: "relu" type: "ReLU" bottom: "conv" top: "conv" })";
  Net<float> net(parse_model(text, "out.prototxt"), Phase::Test, default_cpu_device(), 0, 1);
  EXPECT_EQ(net.blob("conv")->channel_block(), 1);
}

// Scales in place after BatchNorms in place, or (`in_place` false) each writing a blob of its own:
// batch statistics with a bias, then global statistics without one. Only the former run inside
// their BatchNorm (one pass fewer each way); both must give the same bits.
std::string batch_norm_scales(bool in_place) {
  std::string text = R"(
  layer { name: "data" type: "Input" top: "data" top: "label"
          input_param { shape { dim: 4 dim: 8 dim: 6 dim: 6 } shape { dim: 4 } } }
  layer { name: "conv1" type: "Convolution" bottom: "data" top: "c1"
          convolution_param { num_output: 16 kernel_size: 3 pad: 1 weight_filler { type: "xavier" } } }
  layer { name: "bn1" type: "BatchNorm" bottom: "c1" top: "c1"
          batch_norm_param { use_global_stats: false } }
  layer { name: "scale1" type: "Scale" bottom: "c1" top: "S1"
          scale_param { bias_term: true filler { type: "gaussian" mean: 1 std: 0.2 }
                        bias_filler { type: "gaussian" std: 0.2 } } }
  layer { name: "relu1" type: "ReLU" bottom: "S1" top: "S1" }
  layer { name: "conv2" type: "Convolution" bottom: "S1" top: "c2"
          convolution_param { num_output: 16 kernel_size: 3 pad: 1 weight_filler { type: "xavier" } } }
  layer { name: "bn2" type: "BatchNorm" bottom: "c2" top: "c2" batch_norm_param { use_global_stats: true } }
  layer { name: "scale2" type: "Scale" bottom: "c2" top: "S2"
          scale_param { filler { type: "gaussian" mean: 1 std: 0.2 } } }
  layer { name: "pool" type: "Pooling" bottom: "S2" top: "pool"
          pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
  layer { name: "ip" type: "InnerProduct" bottom: "pool" top: "ip"
          inner_product_param { num_output: 5 weight_filler { type: "xavier" } } }
  layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
)";
  for (const auto& [from, to] : {std::pair{"S1", "c1"}, std::pair{"S2", "c2"}})
    for (size_t at; (at = text.find(from)) != std::string::npos;)
      text.replace(at, 2, in_place ? to : cat("s", from[1]));
  return text;
}

// The TEST net's loss on fixed random data (bn1's use_global_stats: false keeps batch statistics).
double test_loss(const std::string& model, int* taken_over) {
  Net<float> net(parse_model(model, "test.prototxt"), Phase::Test, default_cpu_device(), 0, 4);
  *taken_over = scales_taken_over(net);
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  for (float& v : net.input_data().mutable_data_span()) v = normal(rng);
  float* label = net.input_label()->mutable_data();
  for (int n = 0; n < 4; ++n) label[n] = static_cast<float>(n);
  net.forward({});
  return net.loss();
}

void expect_scales_inside_batch_norms_give_the_same_bits() {
  for (bool blocks : {false, true}) {
    const std::string fused_model = batch_norm_scales(true), apart_model = batch_norm_scales(false);
    const Training fused = train(blocks, fused_model.c_str());
    const Training apart = train(blocks, apart_model.c_str());
    EXPECT_EQ(fused.scales_taken_over, 2);
    EXPECT_EQ(apart.scales_taken_over, 0);
    EXPECT_EQ(fused.loss, apart.loss) << "blocks " << blocks;
    EXPECT_EQ(fused.params, apart.params) << "blocks " << blocks;
    const ScopedChannelBlocks scoped(blocks);
    int fused_count = 0, apart_count = 0;
    EXPECT_EQ(test_loss(fused_model, &fused_count), test_loss(apart_model, &apart_count));
    EXPECT_EQ(fused_count, 2);
    EXPECT_EQ(apart_count, 0);
  }
}

TEST(BatchNormScale, AScaleInsideItsBatchNormTrainsToTheBitsOfTheTwoApartInFp32) {
  expect_scales_inside_batch_norms_give_the_same_bits();
}

TEST(BatchNormScale, AScaleInsideItsBatchNormTrainsToTheBitsOfTheTwoApartInBf16) {
  const ScopedLayerPrecision bf16(Precision::kBf16);
  expect_scales_inside_batch_norms_give_the_same_bits();
}

}  // namespace
}  // namespace cgdp
