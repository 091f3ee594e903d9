// A net's wiring and sizes from a model file: what Caffe refuses (two layers of one name, a blob
// with two producers, a layer listing a top twice) and sizes past 64 bits are one error naming
// file:line, never a crash or a silently dropped layer; what Caffe allows still builds.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "cgdp/core/error.hpp"
#include "cgdp/device/cpu_device.hpp"
#include "cgdp/net/model_file.hpp"
#include "cgdp/net/net.hpp"

namespace cgdp {
namespace {

// Line 1 is the Input layer; the tests' layers start on line 2.
const std::string kInput =
    "layer { name: \"in\" type: \"Input\" top: \"data\" top: \"label\" input_param {"
    " shape { dim: 2 dim: 1 dim: 4 dim: 4 } shape { dim: 2 } } }\n";
const std::string kLoss =
    "layer { name: \"loss\" type: \"SoftmaxWithLoss\" bottom: \"ip\" bottom: \"label\" top: "
    "\"loss\" }\n";

std::string build_error(const std::string& body, const std::string& input = kInput) {
  try {
    Net<float> net(parse_model(input + body + kLoss, "m.prototxt"), Phase::Train,
                   default_cpu_device(), 0, 1, "m.prototxt");
  } catch (const ModelError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(WiringCheck, ParsedLayersKnowTheirLines) {
  const auto net =
      parse_model("name: \"n\"\n\nlayer {\n name: \"a\" type: \"ReLU\"\n}\nlayer { name: \"b\" type: \"ReLU\" }\n",
                  "m.prototxt");
  ASSERT_EQ(net.layer_size(), 2);
  EXPECT_EQ(located("m.prototxt", net.layer(0)), "m.prototxt:3");
  EXPECT_EQ(located("m.prototxt", net.layer(1)), "m.prototxt:6");
  EXPECT_EQ(located("m.prototxt", proto::LayerParameter()), "m.prototxt");
}

TEST(WiringCheck, ATopListedTwiceByOneLayerIsNamedNotACrash) {
  EXPECT_EQ(
      build_error("layer { name: \"s\" type: \"Split\" bottom: \"data\" top: \"d\" top: \"d\" }\n"
                  "layer { name: \"ip\" type: \"InnerProduct\" bottom: \"d\" top: \"ip\" "
                  "inner_product_param { num_output: 3 } }\n"),
      "m.prototxt:2: layer 's': lists top 'd' twice");
  EXPECT_EQ(build_error("layer { name: \"ip\" type: \"InnerProduct\" bottom: \"data\" top: \"ip\" "
                        "inner_product_param { num_output: 3 } }\n",
                        "layer { name: \"in\" type: \"Input\" top: \"data\" top: \"data\" top: "
                        "\"label\" input_param { shape { dim: 2 dim: 4 } shape { dim: 2 dim: 4 } "
                        "shape { dim: 2 } } }\n"),
            "m.prototxt:1: layer 'in': lists top 'data' twice");
}

TEST(WiringCheck, TwoLayersOfOneNameAreRefused) {
  EXPECT_EQ(build_error("layer { name: \"ip\" type: \"InnerProduct\" bottom: \"data\" top: \"a\" "
                        "inner_product_param { num_output: 3 } }\n"
                        "layer { name: \"ip\" type: \"InnerProduct\" bottom: \"a\" top: \"ip\" "
                        "inner_product_param { num_output: 3 } }\n"),
            "m.prototxt:3: layer 'ip': the name is already used by another layer (line 2); each "
            "layer that learns needs its own, since its parameters are saved under it");
  // Layers that save nothing may share a name, as Caffe's autoencoder's two "loss" layers do.
  EXPECT_EQ(build_error("layer { name: \"ip\" type: \"InnerProduct\" bottom: \"data\" top: \"a\" "
                        "inner_product_param { num_output: 3 } }\n"
                        "layer { name: \"act\" type: \"Sigmoid\" bottom: \"a\" top: \"b\" }\n"
                        "layer { name: \"act\" type: \"Sigmoid\" bottom: \"b\" top: \"ip\" }\n"),
            "(no error)");
}

// A layer without a name, or one ending in "/state", trained and saved a file that --weights
// could not read back ("/0", or the state of another layer).
TEST(WiringCheck, NamesTheWeightsCannotBeReadBackUnderAreRefused) {
  for (const std::string name : {"", "ip/state"})
    EXPECT_EQ(build_error("layer { name: \"" + name +
                          "\" type: \"InnerProduct\" bottom: \"data\" "
                          "top: \"a\" inner_product_param { num_output: 3 } }\n"),
              "m.prototxt:2: layer '" + name +
                  "' (InnerProduct): each layer needs a name, not "
                  "empty and not ending in '/state', since its parameters are saved and read back "
                  "under it");
}

TEST(WiringCheck, ATopWrittenByTwoLayersIsRefused) {
  EXPECT_EQ(build_error("layer { name: \"ip1\" type: \"InnerProduct\" bottom: \"data\" top: \"ip\" "
                        "inner_product_param { num_output: 3 } }\n"
                        "layer { name: \"ip2\" type: \"InnerProduct\" bottom: \"data\" top: \"ip\" "
                        "inner_product_param { num_output: 3 } }\n"),
            "m.prototxt:3: layer 'ip2': top 'ip' is already produced by layer 'ip1' (line 2); a "
            "blob has one producer, or is rewritten in place (a top named as the layer's bottom "
            "in the same position)");
}

TEST(WiringCheck, InPlaceLayersAndPhaseTwinsStillBuild) {
  // ReLU in place, and two "ip" layers of one name, one per phase (as Caffe's train_val files).
  const std::string body =
      "layer { name: \"ip\" type: \"InnerProduct\" bottom: \"data\" top: \"ip\" "
      "inner_product_param { num_output: 3 } include { phase: TRAIN } }\n"
      "layer { name: \"ip\" type: \"InnerProduct\" bottom: \"data\" top: \"ip\" "
      "inner_product_param { num_output: 3 } include { phase: TEST } }\n"
      "layer { name: \"relu\" type: \"ReLU\" bottom: \"ip\" top: \"ip\" }\n";
  EXPECT_EQ(build_error(body), "(no error)");
}

// A layer that reads what it would overwrite (an InnerProduct, a Pooling, a Convolution, an LRN
// written in place) is refused by name, as Caffe refuses it: it had corrupted the heap.
TEST(WiringCheck, LayersThatCannotRunInPlaceAreRefusedNotRun) {
  const std::string flat =
      "layer { name: \"flat\" type: \"Flatten\" bottom: \"data\" top: \"flat\" }\n";
  for (const auto& [layer, input] : std::vector<std::pair<std::string, std::string>>{
           {"layer { name: \"fc\" type: \"InnerProduct\" bottom: \"flat\" top: \"flat\" "
            "inner_product_param { num_output: 16 } }\n",
            flat},
           {"layer { name: \"pool\" type: \"Pooling\" bottom: \"data\" top: \"data\" "
            "pooling_param { kernel_size: 1 } }\n",
            ""},
           {"layer { name: \"conv\" type: \"Convolution\" bottom: \"data\" top: \"data\" "
            "convolution_param { num_output: 1 kernel_size: 1 } }\n",
            ""},
           {"layer { name: \"norm\" type: \"LRN\" bottom: \"data\" top: \"data\" }\n", ""}}) {
    const std::string error = build_error(input + layer + "layer { name: \"ip\" type: "
                                          "\"InnerProduct\" bottom: \"data\" top: \"ip\" "
                                          "inner_product_param { num_output: 3 } }\n");
    EXPECT_NE(error.find("cannot run in place: its top 0 is its bottom 0"), std::string::npos)
        << layer << error;
    EXPECT_NE(error.find(input.empty() ? "m.prototxt:2" : "m.prototxt:3"), std::string::npos)
        << error;
  }
}

TEST(WiringCheck, SizesPast64BitsNameTheLayerAndLine) {
  const auto conv = [](int outputs) {
    return cat(
        "layer { name: \"conv\" type: \"Convolution\" bottom: \"data\" top: \"c\" "
        "convolution_param { num_output: ",
        outputs,
        " kernel_size: 2147483647 } }\n"
        "layer { name: \"ip\" type: \"InnerProduct\" bottom: \"c\" top: \"ip\" "
        "inner_product_param { num_output: 3 } }\n");
  };
  EXPECT_EQ(build_error(conv(4)),
            "m.prototxt:2: layer 'conv' (Convolution): shape 4x1x2147483647x2147483647 has more "
            "elements than 64 bits count");
  EXPECT_EQ(build_error(conv(2)),
            "m.prototxt:2: layer 'conv' (Convolution): shape 2x1x2147483647x2147483647 has more "
            "bytes than 64 bits count");
  const std::string huge_input =
      "layer { name: \"in\" type: \"Input\" top: \"data\" top: \"label\" input_param {"
      " shape { dim: 4294967296 dim: 4294967296 dim: 1 } shape { dim: 2 } } }\n";
  EXPECT_EQ(build_error("layer { name: \"ip\" type: \"InnerProduct\" bottom: \"data\" top: \"ip\" "
                        "inner_product_param { num_output: 3 } }\n",
                        huge_input),
            "m.prototxt:1: layer 'in' (Input): shape 4294967296x4294967296x1 has more elements "
            "than 64 bits count");
}

TEST(WiringCheck, AnUnknownTypeNamesFileAndLine) {
  const std::string msg =
      build_error("layer { name: \"ip\" type: \"InnerProdukt\" bottom: \"data\" top: \"ip\" }\n");
  EXPECT_EQ(msg.rfind("m.prototxt:2: layer 'ip': unknown type 'InnerProdukt' (known: ", 0), 0u)
      << msg;
}

}  // namespace
}  // namespace cgdp
