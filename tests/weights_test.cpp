// Weights in and out by layer name: a .caffemodel written by an independent writer (V2 and V1)
// loads bit for bit; fine-tuning with a renamed or reshaped last layer; cgdp's own safetensors and
// checkpoints; a PyTorch-named safetensors through a --weights-map; export back to .caffemodel.
#include "cgdp/caffe_import/weights.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cgdp/device/cpu_device.hpp"
#include "cgdp/io/checkpoint.hpp"
#include "cgdp/io/file.hpp"
#include "cgdp/io/safetensors.hpp"
#include "cgdp/net/model_file.hpp"
#include "cgdp/tensor/channel_blocks.hpp"
#include "support/caffe_tree.hpp"
#include "support/run_command.hpp"
#include "support/temp_dir.hpp"
#include "support/test_paths.hpp"

namespace cgdp {
namespace {

using testing::TempDir;

std::string lenet_path() { return (testing::published_caffe_files() / "examples/mnist/lenet.prototxt").string(); }

std::unique_ptr<Net<float>> lenet(uint64_t seed = 1, const std::string& path = lenet_path()) {
  return std::make_unique<Net<float>>(load_model(path), Phase::Test, default_cpu_device(), 1, seed, path);
}

std::vector<float> values_of(const Blob<float>& b) { return {b.data(), b.data() + b.count()}; }

int v1_type(const std::string& type) {
  return type == "Convolution" ? 4 : type == "InnerProduct" ? 14 : 0;
}

// Writes the net's layers' blob shapes as a spec, runs the independent writer, and returns the
// raw values it wrote, in file order.
std::vector<float> write_independent(Net<float>& net, const std::string& format, const std::string& out) {
  nlohmann::json spec = {{"format", format}, {"seed", 5}, {"layers", nlohmann::json::array()}};
  for (int i = 0; i < net.num_layers(); ++i) {
    if (net.layer(i).params().empty()) continue;
    nlohmann::json blobs = nlohmann::json::array();
    for (const auto& p : net.layer(i).params()) blobs.push_back(p->shape());
    spec["layers"].push_back({{"name", net.layer(i).name()}, {"type", net.layer(i).type()},
                              {"v1_type", v1_type(net.layer(i).type())}, {"blobs", blobs}});
  }
  std::ofstream(out + ".json") << spec.dump();
  const auto r = testing::run_command(cat(testing::source_dir(), "/tests/support/write_caffemodel.py ", out, ".json ", out, " 2>&1"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const std::string raw = read_file(out + ".f32");
  std::vector<float> values(raw.size() / 4);
  std::memcpy(values.data(), raw.data(), raw.size());
  return values;
}

void expect_holds(Net<float>& net, const std::vector<float>& raw) {
  size_t at = 0;
  for (int i = 0; i < net.num_layers(); ++i)
    for (const auto& p : net.layer(i).params()) {
      ASSERT_LE(at + p->count(), raw.size());
      EXPECT_EQ(0, std::memcmp(p->data(), raw.data() + at, p->bytes())) << net.layer(i).name();
      at += static_cast<size_t>(p->count());
    }
  EXPECT_EQ(at, raw.size());
}

TEST(Weights, AnIndependentlyWrittenCaffemodelLoadsBitForBit) {
  for (const char* format : {"v2", "v1"}) {
    SCOPED_TRACE(format);
    TempDir dir;
    auto net = lenet();
    const std::string file = (dir / cat("lenet_", format, ".caffemodel")).string();
    const auto raw = write_independent(*net, format, file);
    const WeightsReport r = load_weights(*net, {read_weights_file(file)}, false);
    EXPECT_EQ(r.loaded, 4);
    EXPECT_TRUE(r.missing.empty());
    expect_holds(*net, raw);
  }
}

// Fine-tuning: the last layer renamed starts from its filler; reshaped under its old name, it is an
// error naming both shapes unless the mismatch is allowed.
TEST(Weights, FineTuningWithARenamedOrReshapedLastLayer) {
  TempDir dir;
  auto source = lenet();
  const std::string file = (dir / "lenet.caffemodel").string();
  const auto raw = write_independent(*source, "v2", file);
  std::string text = read_file(lenet_path());
  const size_t ip2 = text.find("name: \"ip2\"");
  ASSERT_NE(ip2, std::string::npos);
  std::string renamed = text;
  renamed.replace(ip2, 11, "name: \"ip2_new\"");
  std::ofstream(dir / "renamed.prototxt") << renamed;
  auto tuned = lenet(1, (dir / "renamed.prototxt").string());
  const WeightsReport r = load_weights(*tuned, {read_weights_file(file)}, false);
  EXPECT_EQ(r.loaded, 3);
  ASSERT_EQ(r.missing.size(), 1u);
  EXPECT_EQ(r.missing[0], "ip2_new");
  EXPECT_EQ(r.unused, std::vector<std::string>{"ip2"});
  EXPECT_NE(r.summary().find("3 layers loaded, 1 initialised by their fillers (ip2_new), 1 in the files but not"),
            std::string::npos) << r.summary();

  std::string reshaped = text;
  const size_t outputs = reshaped.find("num_output: 10");
  ASSERT_NE(outputs, std::string::npos);
  reshaped.replace(outputs, 14, "num_output: 7");
  std::ofstream(dir / "reshaped.prototxt") << reshaped;
  auto narrow = lenet(1, (dir / "reshaped.prototxt").string());
  try {
    load_weights(*narrow, {read_weights_file(file)}, false);
    ADD_FAILURE() << "no error";
  } catch (const ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("layer 'ip2' blob 0: " + file + " holds 10x500, the net has 7x500"),
              std::string::npos) << e.what();
  }
  const std::vector<float> fresh = values_of(*narrow->layer(narrow->num_layers() - 2).params()[0]);
  const WeightsReport allowed = load_weights(*narrow, {read_weights_file(file)}, true);
  EXPECT_EQ(allowed.loaded, 3);
  EXPECT_EQ(allowed.mismatched, 1);
  EXPECT_EQ(values_of(*narrow->layer(narrow->num_layers() - 2).params()[0]), fresh);  // left as filled
}

TEST(Weights, ExportedCaffemodelAndSafetensorsReadBackExactly) {
  TempDir dir;
  auto trained = lenet(3);
  auto fresh = lenet(4);
  ASSERT_NE(values_of(*trained->layer(1).params()[0]), values_of(*fresh->layer(1).params()[0]));
  write_caffemodel(*trained, (dir / "out.caffemodel").string());
  write_parameters_safetensors(*trained, (dir / "out.safetensors").string(), {});
  for (const char* name : {"out.caffemodel", "out.safetensors"}) {
    auto loaded = lenet(4);
    EXPECT_EQ(load_weights(*loaded, {read_weights_file((dir / name).string())}, false).loaded, 4) << name;
    for (int i = 0; i < loaded->num_layers(); ++i)
      for (size_t p = 0; p < loaded->layer(i).params().size(); ++p)
        EXPECT_EQ(values_of(*loaded->layer(i).params()[p]), values_of(*trained->layer(i).params()[p])) << name;
  }
}

// A PyTorch state_dict's names ("features.0.weight") need a map; an unmapped tensor is an error.
TEST(Weights, ForeignSafetensorsLoadThroughAMap) {
  TempDir dir;
  auto source = lenet(3);
  std::map<std::string, std::vector<float>> values;
  TensorRefs tensors;
  const std::map<std::string, std::string> torch_names = {
      {"features.0.weight", "conv1/0"}, {"features.0.bias", "conv1/1"}, {"features.3.weight", "conv2/0"},
      {"features.3.bias", "conv2/1"},   {"classifier.0.weight", "ip1/0"}, {"classifier.0.bias", "ip1/1"},
      {"classifier.2.weight", "ip2/0"}, {"classifier.2.bias", "ip2/1"}};
  std::ofstream map(dir / "map.txt");
  map << "# torchvision-style names to LeNet's layers\n";
  for (const auto& [torch, ours] : torch_names) {
    const size_t slash = ours.rfind('/');
    Net<float>& n = *source;
    for (int i = 0; i < n.num_layers(); ++i)
      if (n.layer(i).name() == ours.substr(0, slash)) {
        const auto& blob = *n.layer(i).params()[std::stoi(ours.substr(slash + 1))];
        values[torch] = values_of(blob);
        tensors.emplace(torch, TensorRef::of(values[torch], blob.shape()));
      }
    map << torch << " " << ours << "\n";
  }
  map.close();
  save_safetensors(dir / "torch.safetensors", tensors);
  auto loaded = lenet(4);
  const auto names = read_weights_map((dir / "map.txt").string());
  EXPECT_EQ(load_weights(*loaded, {read_weights_file((dir / "torch.safetensors").string(), names)}, false).loaded, 4);
  EXPECT_EQ(values_of(*loaded->layer(1).params()[0]), values_of(*source->layer(1).params()[0]));
  std::ofstream(dir / "short_map.txt") << "features.0.weight conv1/0\n";
  try {
    read_weights_file((dir / "torch.safetensors").string(), read_weights_map((dir / "short_map.txt").string()));
    ADD_FAILURE() << "no error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 'classifier.0.bias' is not in the weights map"), std::string::npos)
        << e.what();
  }
  std::ofstream(dir / "bad_map.txt") << "features.0.weight\n";
  try {
    read_weights_map((dir / "bad_map.txt").string());
    ADD_FAILURE() << "no error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("bad_map.txt:1: expected \"tensor_name layer/index\""), std::string::npos)
        << e.what();
  }
}

// PyTorch's own names for modules named as the layers ("ip1.weight", "ip1.bias") need no map.
TEST(Weights, PyTorchModuleNamesLoadWithoutAMap) {
  TempDir dir;
  auto source = lenet(3);
  std::map<std::string, std::vector<float>> values;
  TensorRefs tensors;
  for (int i = 0; i < source->num_layers(); ++i)
    for (size_t p = 0; p < source->layer(i).params().size(); ++p) {
      const std::string name = cat(source->layer(i).name(), p == 0 ? ".weight" : ".bias");
      values[name] = values_of(*source->layer(i).params()[p]);
      tensors.emplace(name, TensorRef::of(values[name], source->layer(i).params()[p]->shape()));
    }
  ASSERT_EQ(tensors.size(), 8u);
  save_safetensors(dir / "state_dict.safetensors", tensors);
  auto loaded = lenet(4);
  const WeightsReport report = load_weights(*loaded, {read_weights_file((dir / "state_dict.safetensors").string())}, false);
  EXPECT_EQ(report.loaded, 4);
  EXPECT_TRUE(report.missing.empty());
  for (int i = 0; i < loaded->num_layers(); ++i)
    for (size_t p = 0; p < loaded->layer(i).params().size(); ++p)
      EXPECT_EQ(values_of(*loaded->layer(i).params()[p]), values_of(*source->layer(i).params()[p]));
  std::vector<float> one{1.f};
  save_safetensors(dir / "odd.safetensors", {{"bn.running_mean", TensorRef::of(one, {1})}});
  try {
    read_weights_file((dir / "odd.safetensors").string());
    ADD_FAILURE() << "no error";
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("tensor 'bn.running_mean' is named neither"));
  }
}

// `cgdp test` (caffe test) scores LeNet's TEST net on the LMDB its model file names, and its
// deploy file on the same LMDB given as --data: the accuracy and loss are what `cgdp forward` of
// the same records, scaled by the layer's transform, and a count by hand give.
TEST(TestCommand, ScoresTheTestNetAsForwardAndACountByHand) {
  const testing::CaffeTree tree;  // 8 MNIST-shaped records, labels 0..7 (caffe_tree.hpp)
  const auto& root = tree.root();
  auto weights = lenet(3);
  write_parameters_safetensors(*weights, (root / "w.safetensors").string(), {});
  const int records = 8;
  std::vector<float> inputs(records * 28 * 28);
  for (int i = 0; i < records; ++i)
    for (int p = 0; p < 28 * 28; ++p)
      inputs[i * 28 * 28 + p] = static_cast<float>((p * 7 + i * 31) % 251) * 0.00390625f;
  save_safetensors(root / "in.safetensors",
                   {{"data", TensorRef::of(inputs, {records, 1, 28, 28})}});
  const auto forward = testing::run_command(
      cat(testing::binary_dir(), "/cgdp forward --model ", lenet_path(), " --weights ",
          (root / "w.safetensors").string(), " --input ", (root / "in.safetensors").string(),
          " --out ", (root / "prob.safetensors").string(), " 2>&1"));
  ASSERT_EQ(forward.exit_code, 0) << forward.output;
  const std::vector<float> prob = load_safetensors(root / "prob.safetensors").values<float>("prob");
  ASSERT_EQ(prob.size(), records * 10u);
  int correct = 0;
  double loss = 0;
  for (int i = 0; i < records; ++i) {
    const float* row = prob.data() + i * 10;
    correct += std::max_element(row, row + 10) - row == i % 10;
    loss -= std::log(static_cast<double>(row[i % 10])) / records;
  }
  const auto test = testing::run_command(
      cat("cd ", root, " && ", testing::binary_dir(),
          "/cgdp test --model examples/mnist/lenet_train_test.prototxt --weights w.safetensors "
          "--json"));
  ASSERT_EQ(test.exit_code, 0) << test.output;
  const auto result = nlohmann::json::parse(test.output);
  EXPECT_EQ(result.at("samples"), records);
  EXPECT_DOUBLE_EQ(result.at("accuracy").get<double>(), correct / double(records));
  EXPECT_NEAR(result.at("loss").get<double>(), loss, 1e-5 * loss);
  // The deploy file on the same records (--data): a loss and an Accuracy on the logits under
  // its Softmax, labels from the source, give the same figures.
  const auto deploy = testing::run_command(
      cat("cd ", root, " && ", testing::binary_dir(), "/cgdp test --model ", lenet_path(),
          " --weights w.safetensors --data lmdb:examples/mnist/mnist_test_lmdb --json"));
  ASSERT_EQ(deploy.exit_code, 0) << deploy.output;
  const auto scored = nlohmann::json::parse(deploy.output);
  EXPECT_EQ(scored.at("samples"), records);
  EXPECT_DOUBLE_EQ(scored.at("accuracy").get<double>(), correct / double(records));
  EXPECT_NEAR(scored.at("loss").get<double>(), loss, 1e-5 * loss);
  // Weights that leave a layer at its filler score random values: refused.
  const std::vector<float> conv1 = values_of(*weights->layer(1).params()[0]),
                           bias = values_of(*weights->layer(1).params()[1]);
  save_safetensors(root / "part.safetensors",
                   {{"conv1.weight", TensorRef::of(conv1, weights->layer(1).params()[0]->shape())},
                    {"conv1.bias", TensorRef::of(bias, weights->layer(1).params()[1]->shape())}});
  const auto part = testing::run_command(
      cat("cd ", root, " && ", testing::binary_dir(),
          "/cgdp test --model examples/mnist/lenet_train_test.prototxt --weights part.safetensors "
          "2>&1"));
  EXPECT_EQ(part.exit_code, 1);
  EXPECT_THAT(part.output,
              ::testing::HasSubstr("the test would score their random initial values"));
}

// `cgdp forward` runs the weights over a file's inputs at the file's batch and writes the net's
// outputs (LeNet deploy: prob) as this process's forward computes them; bad inputs are named.
TEST(Forward, WritesTheOutputsOfTheGivenWeightsAndInputs) {
  TempDir dir;
  auto trained = lenet(3);
  write_parameters_safetensors(*trained, (dir / "w.safetensors").string(), {});
  trained->set_batch_size(3);
  std::vector<float> inputs(3 * 28 * 28);
  for (size_t i = 0; i < inputs.size(); ++i) inputs[i] = static_cast<float>((i * 7919) % 255) / 255.f;
  save_safetensors(dir / "in.safetensors", {{"data", TensorRef::of(inputs, {3, 1, 28, 28})}});
  std::copy(inputs.begin(), inputs.end(), trained->input_data().mutable_data_span().begin());
  trained->forward(RunContext{.phase = Phase::Test});
  const std::vector<float> expected = values_of(*trained->blob("prob"));
  const std::string forward = cat(testing::binary_dir(), "/cgdp forward --model ", lenet_path(), " --weights ",
                                  (dir / "w.safetensors").string(), " --out ", (dir / "out.safetensors").string());
  const auto r = testing::run_command(cat(forward, " --input ", (dir / "in.safetensors").string(), " 2>&1"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, ::testing::HasSubstr("4 layers loaded"));
  const SafetensorsFile out = load_safetensors(dir / "out.safetensors");
  ASSERT_EQ(out.tensors().size(), 1u);
  EXPECT_EQ(out.entry("prob").shape, (Shape{3, 10}));
  const std::vector<float> got = out.values<float>("prob");
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_NEAR(got[i], expected[i], 1e-6f * std::abs(expected[i])) << i;

  save_safetensors(dir / "wrong.safetensors", {{"data", TensorRef::of(inputs, {3, 28, 28, 1})}});
  const auto wrong = testing::run_command(cat(forward, " --input ", (dir / "wrong.safetensors").string(), " 2>&1"));
  EXPECT_EQ(wrong.exit_code, 1);
  EXPECT_THAT(wrong.output, ::testing::HasSubstr("tensor 'data' is 3x28x28x1; the model's Input declares 64x1x28x28"));
  save_safetensors(dir / "other.safetensors", {{"pixels", TensorRef::of(inputs, {3, 1, 28, 28})}});
  const auto other = testing::run_command(cat(forward, " --input ", (dir / "other.safetensors").string(), " 2>&1"));
  EXPECT_THAT(other.output, ::testing::HasSubstr("other.safetensors: no tensor 'data'"));
  const auto blob = testing::run_command(cat(forward, " --input ", (dir / "in.safetensors").string(), " --blobs fc9 2>&1"));
  EXPECT_THAT(blob.output, ::testing::HasSubstr("has no blob 'fc9'"));
  const std::vector<float> conv1 = values_of(*trained->layer(1).params()[0]), bias = values_of(*trained->layer(1).params()[1]);
  save_safetensors(dir / "part.safetensors", {{"conv1.weight", TensorRef::of(conv1, trained->layer(1).params()[0]->shape())},
                                              {"conv1.bias", TensorRef::of(bias, trained->layer(1).params()[1]->shape())}});
  const auto part = testing::run_command(cat(testing::binary_dir(), "/cgdp forward --model ", lenet_path(), " --weights ",
                                             (dir / "part.safetensors").string(), " --out ", (dir / "p.safetensors").string(),
                                             " --input ", (dir / "in.safetensors").string(), " 2>&1"));
  EXPECT_EQ(part.exit_code, 1);
  EXPECT_THAT(part.output, ::testing::HasSubstr("the outputs would come from their random initial values"));
}

// An activation the net keeps in a channel block (fashion_cnn's conv2, between oneDNN's convolution
// and its pooling) is written in Caffe's NCHW, as a net with every blob in NCHW computes it.
TEST(Forward, WritesAChannelBlockedBlobAsNchw) {
  TempDir dir;
  const std::string model = find_model_file("fashion_cnn");
  const ScopedChannelBlocks plain(false);
  Net<float> net(load_model(model), Phase::Test, default_cpu_device(), 2, 5, model);
  write_parameters_safetensors(net, (dir / "w.safetensors").string(), {});
  std::vector<float> images(2 * 28 * 28), labels{3, 7};
  for (size_t i = 0; i < images.size(); ++i)
    images[i] = static_cast<float>((i * 7919) % 255) / 255.f;
  save_safetensors(dir / "in.safetensors", {{"data", TensorRef::of(images, {2, 1, 28, 28})},
                                            {"label", TensorRef::of(labels, {2})}});
  std::copy(images.begin(), images.end(), net.input_data().mutable_data_span().begin());
  net.forward(RunContext{.phase = Phase::Test});
  const std::vector<float> expected = values_of(*net.blob("conv2"));
  const auto r = testing::run_command(
      cat(testing::binary_dir(), "/cgdp forward --model ", model, " --weights ",
          (dir / "w.safetensors").string(), " --input ", (dir / "in.safetensors").string(),
          " --out ", (dir / "out.safetensors").string(), " --blobs conv2 2>&1"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::vector<float> got = load_safetensors(dir / "out.safetensors").values<float>("conv2");
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i)
    ASSERT_NEAR(got[i], expected[i], 1e-5f * (1 + std::abs(expected[i]))) << i;
#ifdef CGDP_HAVE_ONEDNN
  const ScopedChannelBlocks blocked(true);  // what the command's net does: conv2 in a block
  Net<float> fastest(load_model(model), Phase::Test, default_cpu_device(), 2, 5, model);
  EXPECT_GT(fastest.blob("conv2")->channel_block(), 1);
#endif
}

TEST(Weights, AFileThatIsNeitherIsNamed) {
  TempDir dir;
  std::ofstream(dir / "junk.caffemodel") << "\xff\xff\xff\xff not a model";
  try {
    read_weights_file((dir / "junk.caffemodel").string());
    ADD_FAILURE() << "no error";
  } catch (const ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("junk.caffemodel: not a Caffe model"), std::string::npos) << e.what();
  }
}

// Weights that are not the net's train nothing from them: a file with no layer of the net (an
// empty .caffemodel, a safetensors with no tensors, another model's) is refused, naming what it
// holds, unless --weights-allow-mismatch asks for the fillers; a file larger than memory is
// named; a checkpoint given as weights has its CRC checked, as on --resume.
TEST(Weights, WeightsThatAreNotTheNetsAreRefused) {
  TempDir dir;
  const std::string empty = (dir / "empty.caffemodel").string(),
                    none = (dir / "none.safetensors").string(),
                    other = (dir / "other.safetensors").string();
  std::ofstream(empty).close();
  save_safetensors(none, {}, {});
  const std::vector<float> values(6, 1.f);
  save_safetensors(other, {{"fc_of_another_net/0", TensorRef::of(values, {2, 3})}}, {});
  const std::pair<std::string, std::string> cases[] = {
      {empty, "the file holds no layer"},
      {none, "the file holds no layer"},
      {other, "the file holds 1 layer, the first 'fc_of_another_net'"}};
  for (const auto& [path, holds] : cases) {
    SCOPED_TRACE(path);
    auto net = lenet();
    const StoredWeights file = read_weights_file(path);
    try {
      load_weights(*net, {file}, false);
      ADD_FAILURE() << "loaded";
    } catch (const ModelError& e) {
      EXPECT_THAT(e.what(), ::testing::HasSubstr(path +
                                                 ": no layer of the net 'LeNet' is in it (4 "
                                                 "layers with parameters, the first 'conv1'; " +
                                                 holds));
    }
    EXPECT_EQ(load_weights(*net, {file}, true).loaded, 0);  // asked for: the fillers stay
  }
  // A sparse file larger than any memory (it takes no disk): named, not a std::bad_alloc.
  const std::string huge = (dir / "huge.caffemodel").string();
  std::ofstream(huge).close();
  const uintmax_t memory = static_cast<uintmax_t>(::sysconf(_SC_PHYS_PAGES)) *
                          static_cast<uintmax_t>(::sysconf(_SC_PAGE_SIZE));
  std::filesystem::resize_file(huge, memory + (uintmax_t{1} << 30));
  EXPECT_THAT([&] { read_weights_file(huge); },
              ::testing::ThrowsMessage<IoError>(::testing::HasSubstr(
                  cat("huge.caffemodel: ", memory + (uintmax_t{1} << 30),
                      " bytes, more than this machine's memory"))));
  Checkpoint checkpoint;
  checkpoint.model_fingerprint = "lenet";
  checkpoint.tensors[param_key("conv1", 1)] = {{20}, std::vector<float>(20, 0.5f)};
  const std::string ckpt = (dir / "flipped.ckpt").string();
  save_checkpoint(ckpt, checkpoint);
  std::string bytes = read_file(ckpt);
  bytes[bytes.size() - 3] ^= 0x10;  // one bit of conv1's bias
  std::ofstream(ckpt, std::ios::binary) << bytes;
  EXPECT_THROW(
      {
        try {
          read_weights_file(ckpt);
        } catch (const IoError& e) {
          EXPECT_THAT(e.what(), ::testing::HasSubstr("flipped.ckpt: corrupt: CRC mismatch"));
          throw;
        }
      },
      IoError);
}

// The command line: train LeNet's published solver from a .caffemodel (the summary line says
// what loaded), and export a net's weights back to one.
TEST(Weights, TrainFromWeightsAndExportThem) {
  const testing::CaffeTree tree;
  auto net = lenet();
  const std::string file = (tree.root() / "lenet.caffemodel").string();
  const auto raw = write_independent(*net, "v2", file);
  const auto trained = testing::run_command(
      cat("cd ", tree.root(), " && ", testing::binary_dir(), "/cgdp train --solver examples/mnist/lenet_solver.prototxt "
          "--device-kind cpu --iterations 1 --batch 2 --test-batch 2 --test-iter 1 --plain --weights ", file, " 2>&1"));
  EXPECT_EQ(trained.exit_code, 0) << trained.output;
  EXPECT_NE(trained.output.find("cgdp: weights: 4 layers loaded, 0 initialised by their fillers"), std::string::npos)
      << trained.output;
  TempDir dir;
  const auto r = testing::run_command(cat(testing::binary_dir(), "/cgdp export --model ", lenet_path(), " --weights ", file,
                                          " --to caffemodel --out ", dir / "back.caffemodel", " 2>&1"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("weights: 4 layers loaded, 0 initialised by their fillers"), std::string::npos) << r.output;
  auto back = lenet(9);
  EXPECT_EQ(load_weights(*back, {read_weights_file((dir / "back.caffemodel").string())}, false).loaded, 4);
  expect_holds(*back, raw);
}

}  // namespace
}  // namespace cgdp
