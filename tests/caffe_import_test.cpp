// Reading Caffe's vocabulary: every problem of a file in one report with its line, V1 and deploy
// headers upgraded, include/exclude by phase, level and stage, propagate_down and force_backward.
#include <gtest/gtest.h>

#include <functional>
#include <random>

#include "cgdp/caffe_import/upgrade.hpp"
#include "cgdp/caffe_import/vocabulary.hpp"
#include "cgdp/device/cpu_device.hpp"
#include "cgdp/layers/registry.hpp"
#include "cgdp/net/graph_rewrite.hpp"
#include "cgdp/net/model_file.hpp"
#include "cgdp/net/net.hpp"

namespace cgdp {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(Vocabulary, EveryProblemOfAFileIsReportedWithItsLine) {
  const std::string text =
      "name: \"many\"\n"                                                           // 1
      "layer { name: \"in\" type: \"Input\" top: \"x\"\n"                          // 2
      "  input_param { shape { dim: 1 dim: 4 } } colour: 3 }\n"                    // 3
      "layer { name: \"py\" type: \"Python\" bottom: \"x\" top: \"y\" }\n"          // 4
      "layer { name: \"p\" type: \"Data\" top: \"p\"\n"                           // 5
      "  data_param { source: \"db\" backend: LEVELDB batch_size: 2 } }\n"       // 6
      "layer { name: \"r\" type: \"ReLU\" bottom: \"x\" top: \"r\"\n"              // 7
      "  convolution_param { num_output: 3 } }\n"                                  // 8
      "layer { name: \"c\" type: \"Convolution\" bottom: \"x\" top: \"c\"\n"       // 9
      "  convolution_param { num_output: 3 kernel_size: 1 axis: 2\n"               // 10
      "    weight_filler { type: \"bilinearr\" } } }\n"                            // 11
      "layer { name: \"s\" type: \"Sigmoidd\" bottom: \"x\" top: \"s\" }\n";       // 12
  const std::string msg = error_of([&] { parse_model(text, "many.prototxt"); });
  EXPECT_TRUE(has(msg, "many.prototxt:3:")) << msg;  // unknown field
  EXPECT_TRUE(has(msg, "unknown field 'colour'")) << msg;
  EXPECT_TRUE(has(msg, "many.prototxt:4: layer 'py': Caffe's Python layer: cgdp runs no Python layers")) << msg;
  EXPECT_TRUE(has(msg, "many.prototxt:6: layer 'p' (Data): data_param.backend: LevelDB is not supported")) << msg;
  EXPECT_TRUE(has(msg, "many.prototxt:8: layer 'r' (ReLU): convolution_param: ReLU does not read it")) << msg;
  EXPECT_TRUE(has(msg, "many.prototxt:10: layer 'c' (Convolution): convolution_param.axis: cgdp convolves over axis 1 only")) << msg;
  EXPECT_TRUE(has(msg, "many.prototxt:11: layer 'c' (Convolution): convolution_param.weight_filler.type: filler 'bilinearr'")) << msg;
  EXPECT_TRUE(has(msg, "many.prototxt:12: layer 's': unknown type 'Sigmoidd'")) << msg;
  // One line per problem, in file order.
  EXPECT_EQ(std::count(msg.begin(), msg.end(), '\n'), 6) << msg;
  EXPECT_LT(msg.find(":3:"), msg.find(":4:"));
  EXPECT_LT(msg.find(":11:"), msg.find(":12:"));
}

TEST(Vocabulary, ASyntaxErrorStopsWithItsLineAndColumn) {
  const std::string msg = error_of([] { parse_model("layer {\n  name: \"a\"\n  top: \n}\n", "bad.prototxt"); });
  EXPECT_TRUE(has(msg, "bad.prototxt:4:1:")) << msg;
}

TEST(Vocabulary, AnUnknownEnumValueIsNamed) {
  const std::string msg = error_of([] {
    parse_model("layer { name: \"p\" type: \"Pooling\" pooling_param { pool: MAXX } }", "e.prototxt");
  });
  EXPECT_TRUE(has(msg, "'MAXX' is not a value that field 'pool' takes")) << msg;
}

TEST(Vocabulary, NamesEveryLayerTypeTheRegistryBuilds) {
  // A type the registry builds but the vocabulary does not know would be refused in every file.
  for (const std::string& type : known_layer_types()) {
    const std::string text = cat("layer { name: \"l\" type: \"", type, "\" }");
    const std::string msg = error_of([&] { parse_model(text, "t.prototxt"); });
    EXPECT_FALSE(has(msg, "unknown type")) << type << ": " << msg;
  }
}

TEST(Vocabulary, IncludeAndExcludeTogetherAreRefused) {
  const std::string msg = error_of([] {
    parse_model("layer { name: \"r\" type: \"ReLU\" include { phase: TRAIN } exclude { stage: \"x\" } }", "ie.prototxt");
  });
  EXPECT_TRUE(has(msg, "ie.prototxt:1: layer 'r' gives include and exclude rules")) << msg;
}

// LeNet in Caffe's V1 format, with the old deploy header.
const char* kLenetV1 = R"(name: "LeNet"
input: "data"
input_dim: 64
input_dim: 1
input_dim: 28
input_dim: 28
layers {
  name: "conv1" type: CONVOLUTION bottom: "data" top: "conv1"
  blobs_lr: 1 blobs_lr: 2 weight_decay: 1 weight_decay: 0
  convolution_param { num_output: 20 kernel_size: 5 stride: 1 weight_filler { type: "xavier" } }
}
layers { name: "pool1" type: POOLING bottom: "conv1" top: "pool1" pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layers {
  name: "conv2" type: CONVOLUTION bottom: "pool1" top: "conv2"
  blobs_lr: 1 blobs_lr: 2
  convolution_param { num_output: 50 kernel_size: 5 stride: 1 weight_filler { type: "xavier" } }
}
layers { name: "pool2" type: POOLING bottom: "conv2" top: "pool2" pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layers { name: "ip1" type: INNER_PRODUCT bottom: "pool2" top: "ip1" inner_product_param { num_output: 500 weight_filler { type: "xavier" } } }
layers { name: "relu1" type: RELU bottom: "ip1" top: "ip1" }
layers { name: "ip2" type: INNER_PRODUCT bottom: "ip1" top: "ip2" inner_product_param { num_output: 10 weight_filler { type: "xavier" } } }
layers { name: "prob" type: SOFTMAX bottom: "ip2" top: "prob" }
)";

TEST(Upgrade, V1LayersAndTheDeployHeaderBuildLeNet) {
  const proto::NetParameter net = parse_model(kLenetV1, "lenet_v1.prototxt");
  ASSERT_EQ(net.layer_size(), 9);  // the header's Input, then the eight layers
  EXPECT_EQ(net.layers_size(), 0);
  EXPECT_EQ(net.layer(0).type(), "Input");
  EXPECT_EQ(net.layer(0).top(0), "data");
  EXPECT_EQ(net.layer(1).type(), "Convolution");
  EXPECT_EQ(net.layer(1).source_line(), 7);
  ASSERT_EQ(net.layer(1).param_size(), 2);
  EXPECT_EQ(net.layer(1).param(1).lr_mult(), 2.f);
  EXPECT_EQ(net.layer(1).param(1).decay_mult(), 0.f);
  EXPECT_EQ(net.layer(5).type(), "InnerProduct");
  EXPECT_EQ(net.layer(8).type(), "Softmax");
  Net<float> built(net, Phase::Test, default_cpu_device(), 0, 1, "lenet_v1.prototxt");
  EXPECT_EQ(built.learnable_count(), 431080);
  EXPECT_EQ(built.input_data().shape(), (Shape{64, 1, 28, 28}));
}

TEST(Upgrade, EveryV1TypeHasItsCaffeName) {
  const auto* type = proto::V1LayerParameter::LayerType_descriptor();
  for (int i = 0; i < type->value_count(); ++i) {
    const auto value = static_cast<proto::V1LayerParameter::LayerType>(type->value(i)->number());
    if (value == proto::V1LayerParameter::NONE) continue;
    EXPECT_FALSE(v1_type_name(value).empty()) << type->value(i)->name();
  }
  EXPECT_EQ(v1_type_name(proto::V1LayerParameter::SOFTMAX_LOSS), "SoftmaxWithLoss");
  EXPECT_EQ(v1_type_name(proto::V1LayerParameter::ABSVAL), "AbsVal");
}

TEST(Upgrade, InputShapeHeaderAndItsErrors) {
  const auto net = parse_model("input: \"data\" input_shape { dim: 2 dim: 3 dim: 8 dim: 8 }\n"
                               "layer { name: \"r\" type: \"ReLU\" bottom: \"data\" top: \"r\" }", "h.prototxt");
  ASSERT_EQ(net.layer_size(), 2);
  EXPECT_EQ(net.layer(0).input_param().shape(0).dim(3), 8);
  EXPECT_TRUE(has(error_of([] { parse_model("input: \"data\" input_dim: 2 input_dim: 3", "h.prototxt"); }),
                  "names 1 input(s) but gives 2 input_dim; give four (N, C, H, W) per input"));
  EXPECT_TRUE(has(error_of([] { parse_model("input_dim: 2", "h.prototxt"); }), "without an `input:` name"));
}

TEST(Upgrade, AMixOfV1AndCurrentLayersIsRefused) {
  const std::string msg = error_of([] {
    parse_model("layer { name: \"a\" type: \"Input\" top: \"x\" }\nlayers { name: \"b\" type: RELU }", "mix.prototxt");
  });
  EXPECT_TRUE(has(msg, "mix.prototxt:2: the file mixes V1")) << msg;
}

TEST(Upgrade, OldFieldNamesMoveToTheirNewPlaces) {
  auto net = parse_model(R"(
    layer { name: "d" type: "Data" top: "x" top: "y" data_param { source: "db" batch_size: 4 backend: LMDB scale: 0.5 crop_size: 3 mirror: true } }
    layer { name: "c" type: "Concat" bottom: "x" bottom: "x" top: "c" concat_param { concat_dim: 2 } }
  )", "old.prototxt");
  EXPECT_FLOAT_EQ(net.layer(0).transform_param().scale(), 0.5f);
  EXPECT_EQ(net.layer(0).transform_param().crop_size(), 3u);
  EXPECT_TRUE(net.layer(0).transform_param().mirror());
  EXPECT_FALSE(net.layer(0).data_param().has_scale());
  EXPECT_EQ(net.layer(1).concat_param().axis(), 2);
  EXPECT_FALSE(net.layer(1).concat_param().has_concat_dim());
}

TEST(Upgrade, LevelDbIsRefusedWithWhatToDo) {
  const std::string msg = error_of([] {
    parse_model("layer { name: \"d\" type: \"Data\" top: \"x\" data_param { source: \"db\" batch_size: 4 backend: LEVELDB } }",
                "ldb.prototxt");
  });
  EXPECT_TRUE(has(msg, "ldb.prototxt:1: layer 'd' (Data): data_param.backend: LevelDB is not supported")) << msg;
  EXPECT_TRUE(has(msg, "cgdp convert")) << msg;
}

// Caffe's StateMeetsRule: phase, min/max level, stage and not_stage, against the model's state.
TEST(Stages, IncludeAndExcludeFollowLevelAndStages) {
  proto::NetParameter net = parse_model(R"(
    state { level: 2 stage: "deploy" }
    layer { name: "all" type: "ReLU" }
    layer { name: "deploy_only" type: "ReLU" include { stage: "deploy" } }
    layer { name: "not_deploy" type: "ReLU" include { not_stage: "deploy" } }
    layer { name: "level_1_up" type: "ReLU" include { min_level: 1 } }
    layer { name: "level_up_to_1" type: "ReLU" include { max_level: 1 } }
    layer { name: "train_and_deploy" type: "ReLU" include { phase: TRAIN stage: "deploy" } }
    layer { name: "excluded_in_deploy" type: "ReLU" exclude { stage: "deploy" } }
  )", "s.prototxt");
  auto names = [](const proto::NetParameter& n) {
    std::string out;
    for (const auto& l : n.layer()) out += l.name() + " ";
    return out;
  };
  EXPECT_EQ(names(filter_phase(net, Phase::Train)), "all deploy_only level_1_up train_and_deploy ");
  EXPECT_EQ(names(filter_phase(net, Phase::Test)), "all deploy_only level_1_up ");
  net.mutable_state()->clear_stage();
  EXPECT_EQ(names(filter_phase(net, Phase::Test)), "all not_deploy level_1_up excluded_in_deploy ");
}

// A solver's train_state and test_state, merged with the model's own state (stages added, a set
// level replacing the model's), decide each phase's layers once; their rules become plain phase
// rules, and a layer of neither phase goes.
TEST(Stages, ResolvedStatesLeavePlainPhaseRules) {
  const proto::NetParameter net = parse_model(R"(
    state { level: 1 stage: "common" }
    layer { name: "all" type: "ReLU" }
    layer { name: "on_train" type: "ReLU" include { phase: TEST stage: "test-on-train" } }
    layer { name: "on_test" type: "ReLU" include { phase: TEST stage: "test-on-test" } }
    layer { name: "level_2" type: "ReLU" include { min_level: 2 } }
    layer { name: "common_train" type: "ReLU" include { phase: TRAIN stage: "common" } }
    layer { name: "not_fast" type: "ReLU" exclude { stage: "fast" } }
  )",
                                              "s.prototxt");
  proto::NetState train, test;
  train.set_level(2);
  train.add_stage("fast");
  test.add_stage("test-on-test");
  const proto::NetParameter r = resolve_states(net, train, test);
  std::string shown;
  for (const auto& l : r.layer()) {
    shown += l.name();
    if (l.include_size() > 0) shown += l.include(0).phase() == proto::TRAIN ? ":train" : ":test";
    EXPECT_EQ(l.exclude_size(), 0) << l.name();
    EXPECT_LE(l.include_size(), 1) << l.name();
    shown += " ";
  }
  EXPECT_EQ(shown, "all on_test:test level_2:train common_train:train not_fast:test ");
  EXPECT_FALSE(r.has_state());
  EXPECT_EQ(merged_state(net, train).level(), 2);
  EXPECT_EQ(merged_state(net, train).stage_size(), 2);  // "common", then "fast"
}

const char* kTwoBranches = R"(
  layer { name: "in" type: "Input" top: "x" top: "label" input_param { shape { dim: 2 dim: 3 } shape { dim: 2 } } }
  layer { name: "a" type: "InnerProduct" bottom: "x" top: "a" inner_product_param { num_output: 3 } }
  layer { name: "b" type: "InnerProduct" bottom: "a" top: "b" inner_product_param { num_output: 3 }
          PROPAGATE }
  layer { name: "side" type: "InnerProduct" bottom: "x" top: "side" inner_product_param { num_output: 2 } }
  layer { name: "loss" type: "SoftmaxWithLoss" bottom: "b" bottom: "label" top: "loss" }
)";

int layer_index(const Net<float>& net, const std::string& name) {
  for (int i = 0; i < net.num_layers(); ++i)
    if (net.layer(i).name() == name) return i;
  return -1;
}

TEST(Backward, PropagateDownFalseCutsTheBottomOff) {
  std::string text = kTwoBranches;
  const auto with = [&](const std::string& propagate) {
    std::string t = text;
    t.replace(t.find("PROPAGATE"), 9, propagate);
    return parse_model(t, "b.prototxt");
  };
  Net<float> plain(with(""), Phase::Train, default_cpu_device(), 0, 1, "b.prototxt");
  EXPECT_TRUE(plain.needs_backward(layer_index(plain, "a")));
  Net<float> cut(with("propagate_down: false"), Phase::Train, default_cpu_device(), 0, 1, "b.prototxt");
  // b still learns its own weights, but sends nothing down: a gets no gradient and stays idle.
  EXPECT_TRUE(cut.needs_backward(layer_index(cut, "b")));
  EXPECT_FALSE(cut.needs_backward(layer_index(cut, "a")));
  EXPECT_TRUE(has(error_of([&] { Net<float>(with("propagate_down: true propagate_down: false"), Phase::Train,
                                            default_cpu_device(), 0, 1, "b.prototxt"); }),
                  "gives 2 propagate_down for 1 bottoms"));
}

TEST(Backward, ForceBackwardRunsLayersOffTheLossPath) {
  std::string text = kTwoBranches;
  text.replace(text.find("PROPAGATE"), 9, "");
  Net<float> plain(parse_model(text, "f.prototxt"), Phase::Train, default_cpu_device(), 0, 1, "f.prototxt");
  EXPECT_FALSE(plain.needs_backward(layer_index(plain, "side")));  // its top reaches no loss
  Net<float> forced(parse_model("force_backward: true\n" + text, "f.prototxt"), Phase::Train,
                    default_cpu_device(), 0, 1, "f.prototxt");
  EXPECT_TRUE(forced.needs_backward(layer_index(forced, "side")));
}

TEST(Backward, MoreParamEntriesThanBlobsAreRefused) {
  const std::string msg = error_of([] {
    Net<float>(parse_model(R"(
      layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 2 dim: 3 } } }
      layer { name: "a" type: "InnerProduct" bottom: "x" top: "a" param { lr_mult: 1 } param { lr_mult: 2 } param { lr_mult: 3 }
              inner_product_param { num_output: 3 } }
    )", "p.prototxt"), Phase::Train, default_cpu_device(), 0, 1, "p.prototxt");
  });
  EXPECT_TRUE(has(msg, "layer 'a' gives 3 param entries, but InnerProduct learns 2 blob(s)")) << msg;
}

// Two towers read the same data through InnerProducts that share their weights by name (a
// Siamese net's pattern), and their outputs are summed into the loss.
const char* kSiamese = R"(
  layer { name: "in" type: "Input" top: "data" top: "label"
          input_param { shape { dim: 4 dim: 1 dim: 2 dim: 3 } shape { dim: 4 } } }
  layer { name: "tower_a" type: "InnerProduct" bottom: "data" top: "a"
          param { name: "shared_w" lr_mult: 1 } param { name: "shared_b" lr_mult: 2 }
          inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 0.5 } bias_filler { type: "gaussian" std: 0.5 } } }
  layer { name: "square" type: "Eltwise" bottom: "a" bottom: "a" top: "a2" eltwise_param { operation: PROD } }
  layer { name: "tower_b" type: "InnerProduct" bottom: "data" top: "b"
          param { name: "shared_w" lr_mult: 1 } param { name: "shared_b" lr_mult: 2 }
          inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 0.5 } bias_filler { type: "gaussian" std: 0.5 } } }
  layer { name: "sum" type: "Eltwise" bottom: "a2" bottom: "b" top: "s" }
  layer { name: "loss" type: "SoftmaxWithLoss" bottom: "s" bottom: "label" top: "loss" }
)";

TEST(WeightSharing, OneBlobCountedOnce) {
  Net<float> net(parse_model(kSiamese, "siamese.prototxt"), Phase::Train, default_cpu_device(), 0, 1, "siamese.prototxt");
  EXPECT_EQ(net.learnable_count(), 6 * 3 + 3);
  EXPECT_EQ(net.param_slots().size(), 2u);
  const int a = layer_index(net, "tower_a"), b = layer_index(net, "tower_b");
  EXPECT_EQ(net.layer(a).params()[0]->data(), net.layer(b).params()[0]->data());
  EXPECT_EQ(net.layer(a).params()[1]->diff(), net.layer(b).params()[1]->diff());
  // The owner is the first in forward order, so its slot is the last the backward pass completes.
  EXPECT_EQ(net.param_slots().back().layer, a);
}

// The shared gradient is the sum of both towers' (the towers differ: one is squared), checked
// against central differences of the loss in float64.
TEST(WeightSharing, TheGradientIsTheSumOfTheSharersAndMatchesFiniteDifferences) {
  Net<double> net(parse_model(kSiamese, "siamese.prototxt"), Phase::Train, default_cpu_device(), 0, 3, "siamese.prototxt");
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> uni(-1, 1);
  for (double& x : net.input_data().mutable_data_span()) x = uni(rng);
  for (int i = 0; i < 4; ++i) net.input_label()->mutable_data()[i] = i % 3;
  const RunContext ctx;
  auto loss = [&] {
    net.forward(ctx);
    return net.loss();
  };
  (void)loss();
  for (double& g : net.flat_diff()) g = 0;
  for (int i = net.num_layers() - 1; i >= 0; --i) net.backward_layer(i, ctx);
  const std::vector<double> analytic(net.flat_diff().begin(), net.flat_diff().end());
  for (size_t k = 0; k < analytic.size(); ++k) {
    double& w = net.flat_data()[k];
    const double saved = w, h = 1e-6;
    w = saved + h;
    const double plus = loss();
    w = saved - h;
    const double minus = loss();
    w = saved;
    EXPECT_NEAR(analytic[k], (plus - minus) / (2 * h), 1e-7 * std::max(1.0, std::abs(analytic[k]))) << "parameter " << k;
  }
}

TEST(WeightSharing, SharersOfAnotherShapeOrRateAreRefused) {
  std::string other = kSiamese;
  other.replace(other.rfind("num_output: 3"), 13, "num_output: 4");
  const std::string sum_of_both = "bottom: \"a2\" bottom: \"b\"";
  other.replace(other.find(sum_of_both), sum_of_both.size(), "bottom: \"a2\" bottom: \"a2\"");  // b unused
  const std::string msg = error_of([&] {
    Net<float>(parse_model(other, "s.prototxt"), Phase::Train, default_cpu_device(), 0, 1, "s.prototxt");
  });
  EXPECT_TRUE(has(msg, "layer 'tower_b' shares parameter 'shared_w' of shape 4x6 with layer 'tower_a', whose is 3x6"))
      << msg;
  std::string rate = kSiamese;
  rate.replace(rate.rfind("lr_mult: 2"), 10, "lr_mult: 3");
  EXPECT_TRUE(has(error_of([&] {
                    Net<float>(parse_model(rate, "s.prototxt"), Phase::Train, default_cpu_device(), 0, 1, "s.prototxt");
                  }),
                  "gives another lr_mult or decay_mult"));
}

}  // namespace
}  // namespace cgdp
