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

}  // namespace
}  // namespace cgdp
