// Model files: syntax errors with line:column, unknown fields and types, phase filtering, splits.
#include <gtest/gtest.h>

#include <fstream>

#include "cgdp/core/error.hpp"
#include "cgdp/device/cpu_device.hpp"
#include "cgdp/layers/registry.hpp"
#include "cgdp/net/graph_rewrite.hpp"
#include "cgdp/net/model_file.hpp"

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

TEST(ModelFile, SyntaxErrorNamesFileLineAndColumn) {
  const std::string text = "name: \"x\"\nlayer {\n  name: \"a\"\n  type: \"Input\"\n  top: \n}\n";
  const std::string msg = error_of([&] { parse_model(text, "bad.prototxt"); });
  EXPECT_NE(msg.find("bad.prototxt:6:1:"), std::string::npos) << msg;
}

TEST(ModelFile, UnknownFieldIsNamed) {
  const std::string msg =
      error_of([] { parse_model("layer { name: \"a\" colour: 3 }", "m.prototxt"); });
  EXPECT_NE(msg.find("m.prototxt:1:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("colour"), std::string::npos) << msg;
}

// protobuf's parser recurses once per level: 100,000 levels overflowed the stack (SIGSEGV).
TEST(ModelFile, MessagesNestedTooDeepAreRefusedNotACrash) {
  constexpr int kDepth = 100000;
  std::string text = "name: \"deep\"\n";
  for (int i = 0; i < kDepth; ++i) text += "layer { ";
  text.append(kDepth, '}');
  const std::string msg = error_of([&] { parse_model(text, "deep.prototxt"); });
  EXPECT_NE(msg.find("deep.prototxt:2:"), std::string::npos) << msg.substr(0, 500);
  EXPECT_NE(msg.find(": messages nested more than 100 deep"), std::string::npos)
      << msg.substr(0, 500);
}

TEST(ModelFile, MissingFileIsNamed) {
  const std::string msg = error_of([] { load_model("/nonexistent/dir/net.prototxt"); });
  EXPECT_EQ(msg, "/nonexistent/dir/net.prototxt: no such file");
}

TEST(ModelFile, FindsBundledModelsByName) {
  EXPECT_NE(find_model_file("fashion_cnn").find("models/fashion_cnn.prototxt"), std::string::npos);
}

TEST(Registry, UnknownTypeListsKnownTypes) {
  proto::LayerParameter p;
  p.set_name("weird");
  p.set_type("Convolutionn");
  const std::string msg = error_of([&] { create_layer<float>(p, default_cpu_device()); });
  EXPECT_NE(msg.find("layer 'weird': unknown type 'Convolutionn'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Input"), std::string::npos) << msg;
}

proto::NetParameter fan_out_net() {
  return parse_model(R"(
    layer { name: "in" type: "Input" top: "x" }
    layer { name: "a" type: "ReLU" bottom: "x" top: "a" }
    layer { name: "b" type: "ReLU" bottom: "x" top: "b" }
    layer { name: "acc" type: "Accuracy" bottom: "a" bottom: "b" top: "acc" include { phase: TEST } }
    layer { name: "sum" type: "Eltwise" bottom: "a" bottom: "b" top: "s" exclude { phase: TEST } }
  )", "fan.prototxt");
}

TEST(GraphRewrite, FilterPhaseHonoursIncludeAndExclude) {
  const auto train = filter_phase(fan_out_net(), Phase::Train);
  const auto test = filter_phase(fan_out_net(), Phase::Test);
  ASSERT_EQ(train.layer_size(), 4);
  EXPECT_EQ(train.layer(3).name(), "sum");
  ASSERT_EQ(test.layer_size(), 4);
  EXPECT_EQ(test.layer(3).name(), "acc");
}

TEST(GraphRewrite, InsertsOneSplitPerFannedOutBlob) {
  const auto net = insert_splits(filter_phase(fan_out_net(), Phase::Train), "fan.prototxt");
  ASSERT_EQ(net.layer_size(), 5);
  const auto& split = net.layer(1);
  EXPECT_EQ(split.type(), "Split");
  ASSERT_EQ(split.bottom_size(), 1);
  EXPECT_EQ(split.bottom(0), "x");
  ASSERT_EQ(split.top_size(), 2);
  EXPECT_EQ(net.layer(2).bottom(0), split.top(0));
  EXPECT_EQ(net.layer(3).bottom(0), split.top(1));
  EXPECT_EQ(net.layer(4).bottom(0), "a");  // single consumers keep their names
}

TEST(GraphRewrite, InPlaceChainsNeedNoSplit) {
  const auto net = insert_splits(parse_model(R"(
    layer { name: "in" type: "Input" top: "x" }
    layer { name: "r" type: "ReLU" bottom: "x" top: "x" }
    layer { name: "d" type: "Dropout" bottom: "x" top: "x" }
  )", "inplace.prototxt"), "inplace.prototxt");
  EXPECT_EQ(net.layer_size(), 3);
}

TEST(GraphRewrite, BottomThatNoLayerProducesIsNamed) {
  const std::string msg = error_of([] {
    insert_splits(parse_model(R"(
      layer { name: "in" type: "Input" top: "x" }
      layer { name: "r" type: "ReLU" bottom: "y" top: "z" }
    )", "m.prototxt"), "m.prototxt");
  });
  EXPECT_EQ(msg, "m.prototxt:3: layer 'r': bottom 'y' is not produced by any earlier layer");
}

// A deploy net gets a label top and its scoring layers on the logits under a final Softmax, names
// that do not clash with its own; a net that reads labels is left alone; two outputs are named.
TEST(GraphRewrite, ADeployNetIsScoredOnTheLogitsOfItsOutput) {
  proto::NetParameter deploy = parse_model(R"(
    layer { name: "in" type: "Input" top: "data" input_param { shape { dim: 4 dim: 3 } } }
    layer { name: "loss" type: "InnerProduct" bottom: "data" top: "logits" inner_product_param { num_output: 5 } }
    layer { name: "prob" type: "Softmax" bottom: "logits" top: "prob" }
  )",
                                           "deploy.prototxt");
  EXPECT_EQ(add_scoring_layers(deploy, "deploy.prototxt"),
            "the net reads no labels: scored by a SoftmaxWithLoss and an Accuracy on 'logits' (the "
            "input of its final Softmax 'prob'), with labels from the data");
  ASSERT_EQ(deploy.layer_size(), 5);
  EXPECT_EQ(deploy.layer(0).top(1), "label");
  EXPECT_EQ(deploy.layer(0).input_param().shape(1).dim(0), 4);
  EXPECT_EQ(deploy.layer(3).type(), "SoftmaxWithLoss");
  EXPECT_EQ(deploy.layer(3).name(), "loss_");  // "loss" is the InnerProduct's name
  EXPECT_EQ(deploy.layer(3).bottom(0), "logits");
  EXPECT_EQ(deploy.layer(4).type(), "Accuracy");
  EXPECT_EQ(add_scoring_layers(deploy, "deploy.prototxt"), "") << "it reads labels now";
  proto::NetParameter two = parse_model(R"(
    layer { name: "in" type: "Input" top: "data" input_param { shape { dim: 4 dim: 3 } } }
    layer { name: "a" type: "ReLU" bottom: "data" top: "a" }
    layer { name: "b" type: "Sigmoid" bottom: "data" top: "b" }
  )",
                                        "two.prototxt");
  EXPECT_EQ(error_of([&] { add_scoring_layers(two, "two.prototxt"); }),
            "two.prototxt: the net reads no labels and has 2 outputs (a, b): cgdp test scores "
            "one; add its loss and Accuracy layers to the file");
}

}  // namespace
}  // namespace cgdp
