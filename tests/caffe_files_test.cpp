// Caffe's own published files (tests/data/caffe-models), as a Caffe user brings them: every model
// parses and builds with the published parameter totals, data layers read the LMDBs they name,
// and the test net's figures are found by layer type.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>

#include "cgdp/caffe_import/data_layers.hpp"
#include "cgdp/data/image/image.hpp"
#include "cgdp/device/cpu_device.hpp"
#include "cgdp/net/model_file.hpp"
#include "cgdp/net/net.hpp"
#include "cgdp/train/data_feeds.hpp"
#include "support/caffe_tree.hpp"
#include "support/run_command.hpp"
#include "support/test_paths.hpp"

namespace cgdp {
namespace {

using testing::CaffeTree;
using testing::published_caffe_files;

int64_t total_params(const proto::NetParameter& model, const std::string& path, Phase phase = Phase::Train) {
  Net<float> net(model, phase, default_cpu_device(), 1, 1, path);
  return net.learnable_count();
}

// Parameters of the layers whose names start with `prefix` (GoogLeNet's auxiliary heads).
int64_t params_under(const proto::NetParameter& model, const std::string& path, const std::string& prefix) {
  Net<float> net(model, Phase::Train, default_cpu_device(), 1, 1, path);
  int64_t n = 0;
  for (int i = 0; i < net.num_layers(); ++i)
    if (net.layer(i).name().starts_with(prefix))
      for (const auto& p : net.layer(i).params()) n += p->count();
  return n;
}

struct Published {
  const char* file;
  int64_t params;
};

// Caffe's published totals (issue 17); GoogLeNet's train_val counts its two auxiliary heads.
const Published kTrainFiles[] = {
    {"examples/mnist/lenet_train_test.prototxt", 431080},
    {"examples/cifar10/cifar10_quick_train_test.prototxt", 145578},
    {"examples/cifar10/cifar10_full_train_test.prototxt", 89578},
    {"models/bvlc_alexnet/train_val.prototxt", 60965224},
    {"models/bvlc_reference_caffenet/train_val.prototxt", 60965224},
    {"models/bvlc_googlenet/train_val.prototxt", 13378280},
};

const Published kDeployFiles[] = {
    {"examples/mnist/lenet.prototxt", 431080},
    {"examples/cifar10/cifar10_quick.prototxt", 145578},
    {"models/bvlc_alexnet/deploy.prototxt", 60965224},
    {"models/bvlc_reference_caffenet/deploy.prototxt", 60965224},
};

TEST(PublishedCaffeFiles, DeployFilesBuildWithThePublishedTotals) {
  for (const Published& p : kDeployFiles) {
    const std::string path = (published_caffe_files() / p.file).string();
    EXPECT_EQ(total_params(load_model(path), path), p.params) << p.file;
  }
}

// Each train_val file reads the LMDBs it names, from the folder its paths are relative to.
TEST(PublishedCaffeFiles, TrainValFilesInspectAsPublishedFromTheirRoot) {
  const CaffeTree tree;
  for (const Published& p : kTrainFiles) {
    const auto r = testing::run_command(cat("cd ", tree.root(), " && ", testing::binary_dir(),
                                            "/cgdp inspect --model ", p.file, " 2>&1"));
    EXPECT_EQ(r.exit_code, 0) << p.file << "\n" << r.output;
    EXPECT_NE(r.output.find(cat("total learnable parameters: ", p.params, "\n")), std::string::npos)
        << p.file << "\n" << r.output;
  }
}

TEST(PublishedCaffeFiles, GoogLeNetDeployIsTrainValWithoutItsAuxiliaryHeads) {
  const std::string train = (published_caffe_files() / "models/bvlc_googlenet/train_val.prototxt").string();
  const std::string deploy = (published_caffe_files() / "models/bvlc_googlenet/deploy.prototxt").string();
  proto::NetParameter model = load_model(train);
  TrainConfig shape_only;
  shape_only.data = "synthetic:3,224,224,1000";
  (void)plan_data_feeds(model, train, shape_only);
  const int64_t heads = params_under(model, train, "loss1/") + params_under(model, train, "loss2/");
  EXPECT_GT(heads, 0);
  EXPECT_EQ(total_params(load_model(deploy), deploy), total_params(model, train) - heads);
}

// The data layer's source, transform and batch_size: LeNet reads 1x28x28 records at batch 64 for
// TRAIN and 100 for TEST, scaled by 1/256.
TEST(PublishedCaffeFiles, DataLayersBecomeInputsShapedByTheirFirstRecord) {
  const CaffeTree tree;
  const auto path = (tree.root() / "examples/mnist/lenet_train_test.prototxt").string();
  const auto cwd = std::filesystem::current_path();
  std::filesystem::current_path(tree.root());
  proto::NetParameter model = load_model(path);
  const DataFeeds feeds = plan_data_feeds(model, path, TrainConfig{});
  std::filesystem::current_path(cwd);
  EXPECT_EQ(feeds.train.spec, "lmdb:examples/mnist/mnist_train_lmdb,examples/mnist/mnist_train_lmdb");
  EXPECT_EQ(feeds.test.spec, "lmdb:examples/mnist/mnist_test_lmdb,examples/mnist/mnist_test_lmdb");
  EXPECT_FLOAT_EQ(feeds.train.images.transform.scale, 0.00390625f);
  EXPECT_EQ(feeds.train.images.channels, 1);
  Net<float> train(model, Phase::Train, default_cpu_device(), 0, 1, path);
  EXPECT_EQ(train.input_data().shape(), (Shape{64, 1, 28, 28}));
  Net<float> test(model, Phase::Test, default_cpu_device(), 0, 1, path);
  EXPECT_EQ(test.input_data().shape(), (Shape{100, 1, 28, 28}));
  ASSERT_NE(test.input_label(), nullptr);
  EXPECT_EQ(test.input_label()->shape(), (Shape{100}));
}

// AlexNet: a 256x256 record cropped to 227, its mean image read from the mean file it names.
TEST(PublishedCaffeFiles, CropAndMeanFileComeFromTransformParam) {
  const CaffeTree tree;
  const auto path = (tree.root() / "models/bvlc_alexnet/train_val.prototxt").string();
  const auto cwd = std::filesystem::current_path();
  std::filesystem::current_path(tree.root());
  proto::NetParameter model = load_model(path);
  const DataFeeds feeds = plan_data_feeds(model, path, TrainConfig{});
  std::filesystem::current_path(cwd);
  EXPECT_EQ(feeds.train.images.transform.crop_size, 227);
  EXPECT_TRUE(feeds.train.images.transform.mirror);
  EXPECT_FALSE(feeds.test.images.transform.mirror);
  EXPECT_EQ(feeds.train.images.transform.mean_image.size(), 3u * 256 * 256);
  EXPECT_EQ(feeds.train.images.channels, 3);
  EXPECT_EQ(model.layer(0).input_param().shape(0).dim(0), 256);  // the layer's batch_size
  Net<float> net(model, Phase::Train, default_cpu_device(), 2, 1, path);
  EXPECT_EQ(net.input_data().shape(), (Shape{2, 3, 227, 227}));
}

TEST(PublishedCaffeFiles, AMissingSourceNamesTheLayerTheFileAndTheFlag) {
  const std::string path = (published_caffe_files() / "examples/mnist/lenet_train_test.prototxt").string();
  proto::NetParameter model = load_model(path);
  try {
    (void)plan_data_feeds(model, path, TrainConfig{});
    FAIL() << "no error";
  } catch (const UsageError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("lenet_train_test.prototxt:"), std::string::npos) << m;
    EXPECT_NE(m.find("layer 'mnist'"), std::string::npos) << m;
    EXPECT_NE(m.find("examples/mnist/mnist_test_lmdb"), std::string::npos) << m;  // the TEST layer is read first
    EXPECT_NE(m.find("--data lmdb:DIR"), std::string::npos) << m;
  }
}

TEST(PublishedCaffeFiles, DataOverridesTheLayersSource) {
  const CaffeTree tree;
  const std::string path = (published_caffe_files() / "examples/mnist/lenet_train_test.prototxt").string();
  proto::NetParameter model = load_model(path);
  TrainConfig c;
  c.data = cat("lmdb:", (tree.root() / "examples/mnist/mnist_train_lmdb").string());
  const DataFeeds feeds = plan_data_feeds(model, path, c);
  EXPECT_EQ(feeds.train.spec, c.data);
  EXPECT_EQ(feeds.test.spec, c.data);
}

// Synthetic data in a cropping layer's place are drawn at the crop's size, so the net is the
// published one; data smaller than the crop are refused in one line naming the layer.
TEST(PublishedCaffeFiles, SyntheticDataInACroppingLayersPlaceAreCropped) {
  const std::string model =
      (published_caffe_files() / "models/bvlc_alexnet/train_val.prototxt").string();
  const auto inspect = [&](const std::string& data) {
    return testing::run_command(
        cat(testing::binary_dir(), "/cgdp inspect --model ", model, " --data ", data, " 2>&1"));
  };
  const auto r = inspect("synthetic:3,256,256,1000");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("total learnable parameters: 60965224\n"), std::string::npos) << r.output;
  const auto small = inspect("synthetic:3,200,200,1000");
  EXPECT_NE(small.exit_code, 0);
  EXPECT_NE(small.output.find("train_val.prototxt:"), std::string::npos) << small.output;
  EXPECT_NE(small.output.find("layer 'data' crops its samples to 227x227 (transform_param "
                              "crop_size) but synthetic:3,200,200,1000 gives 3x200x200, smaller "
                              "than the crop"),
            std::string::npos)
      << small.output;
}

// ImageData from a model file: a list of "path label" lines under root_folder, resized by
// new_height/new_width, gray with is_color: false; the test layer has its own list.
TEST(DataLayers, ImageDataReadsItsListUnderItsRootFolder) {
  testing::TempDir dir;
  std::filesystem::create_directories(dir / "images");
  std::ofstream train(dir / "train.txt"), test(dir / "test.txt");
  for (int i = 0; i < 6; ++i) {
    Image im;
    im.height = 10 + i, im.width = 12, im.channels = 3;
    im.pixels.assign(static_cast<size_t>(im.height * 12 * 3), static_cast<uint8_t>(40 * i));
    const auto png = encode_png(im);
    std::ofstream(dir / "images" / cat(i, ".png"), std::ios::binary).write(reinterpret_cast<const char*>(png.data()),
                                                                            static_cast<std::streamsize>(png.size()));
    (i < 4 ? train : test) << cat(i, ".png ", i % 2, "\n");
  }
  train.close(), test.close();
  std::ofstream(dir / "m.prototxt") << R"(
    layer { name: "data" type: "ImageData" top: "data" top: "label" include { phase: TRAIN }
            image_data_param { source: "train.txt" root_folder: "images/" batch_size: 2 new_height: 8 new_width: 8
                               is_color: false } transform_param { scale: 0.00390625 } }
    layer { name: "data" type: "ImageData" top: "data" top: "label" include { phase: TEST }
            image_data_param { source: "test.txt" root_folder: "images/" batch_size: 2 new_height: 8 new_width: 8
                               is_color: false } transform_param { scale: 0.00390625 } }
    layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip" inner_product_param { num_output: 2 } }
    layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
  )";
  const auto r = testing::run_command(cat("cd ", dir.path(), " && ", testing::binary_dir(),
                                          "/cgdp train --model m.prototxt --iterations 3 --plain 2>&1"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("on list:train.txt,images/ (train): 4 train / 2 test samples (train in file order), batch 2"), std::string::npos)
      << r.output;
  const auto cwd = std::filesystem::current_path();
  std::filesystem::current_path(dir.path());
  proto::NetParameter model = load_model("m.prototxt");
  (void)plan_data_feeds(model, "m.prototxt", TrainConfig{});
  std::filesystem::current_path(cwd);
  Net<float> net(model, Phase::Train, default_cpu_device(), 0, 1, "m.prototxt");
  EXPECT_EQ(net.input_data().shape(), (Shape{2, 1, 8, 8}));
}

// DummyData: its fillers make the samples, and its shape the input; a constant label filler.
TEST(DataLayers, DummyDataFeedsItsFillers) {
  testing::TempDir dir;
  std::ofstream(dir / "m.prototxt") << R"(
    layer { name: "data" type: "DummyData" top: "data" top: "label"
            dummy_data_param { shape { dim: 4 dim: 1 dim: 3 dim: 3 } shape { dim: 4 }
                               data_filler { type: "gaussian" std: 1 } data_filler { type: "constant" value: 1 } } }
    layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip" inner_product_param { num_output: 3 } }
    layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
    layer { name: "acc" type: "Accuracy" bottom: "ip" bottom: "label" top: "acc" include { phase: TEST } }
  )";
  const auto r = testing::run_command(cat("cd ", dir.path(), " && ", testing::binary_dir(),
                                          "/cgdp train --model m.prototxt --iterations 30 --lr 0.1 --plain 2>&1"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // Every label is 1: the net learns to say so, whatever the gaussian data.
  EXPECT_NE(r.output.find("test accuracy 1"), std::string::npos) << r.output;
  std::ofstream(dir / "bad.prototxt") << R"(
    layer { name: "data" type: "DummyData" top: "data" top: "label"
            dummy_data_param { shape { dim: 4 dim: 6 } shape { dim: 4 } } })";
  const auto bad = testing::run_command(cat("cd ", dir.path(), " && ", testing::binary_dir(),
                                            "/cgdp inspect --model bad.prototxt 2>&1"));
  EXPECT_NE(bad.output.find("its first top must be N x C x H x W"), std::string::npos) << bad.output;
}

// One TRAIN data layer and two TEST ones selected by stage, as Caffe's mnist_autoencoder has.
const char* kStagedModel = R"(name: "Staged"
layer { name: "data" type: "DummyData" top: "data" top: "label" include { phase: TRAIN }
        dummy_data_param { shape { dim: 4 dim: 1 dim: 3 dim: 3 } shape { dim: 4 }
                           data_filler { type: "gaussian" std: 1 } data_filler { type: "constant" value: 1 } } }
layer { name: "data" type: "DummyData" top: "data" top: "label" include { phase: TEST stage: "test-on-train" }
        dummy_data_param { shape { dim: 3 dim: 1 dim: 3 dim: 3 } shape { dim: 3 } } }
layer { name: "data" type: "DummyData" top: "data" top: "label" include { phase: TEST stage: "test-on-test" }
        dummy_data_param { shape { dim: 5 dim: 1 dim: 3 dim: 3 } shape { dim: 5 } } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip" inner_product_param { num_output: 3 } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
)";

// Caffe's autoencoder pattern: one TRAIN data layer, two TEST ones selected by stage. Without a
// stage the TEST net has no data: train refuses in one line naming both layers and their stages,
// inspect shows the TRAIN net and says so; a solver's test_state (or --test-stage) picks one.
TEST(DataLayers, TestStatesPickTheTestNetsDataLayer) {
  testing::TempDir dir;
  std::ofstream(dir / "m.prototxt") << kStagedModel;
  std::ofstream(dir / "solver.prototxt")
      << "net: \"m.prototxt\" max_iter: 2 base_lr: 0.1 test_iter: 1 solver_mode: CPU "
         "test_state { stage: \"test-on-test\" }\n";
  const auto cgdp = [&](const std::string& args) {
    return testing::run_command(
        cat("cd ", dir.path(), " && ", testing::binary_dir(), "/cgdp ", args, " 2>&1"));
  };
  const std::string needs =
      "m.prototxt: the TEST net has no data layer: 'data' (line 5: stage test-on-train), 'data' "
      "(line 7: "
      "stage test-on-test); give its stage";
  auto r = cgdp("train --model m.prototxt --iterations 2 --plain");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_EQ(r.output.rfind("cgdp: error: " + needs, 0), 0u) << r.output;
  r = cgdp("inspect --model m.prototxt");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("cgdp: note: " + needs), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("shown: the TRAIN net"), std::string::npos) << r.output;
  // The test net's batch is its data layer's: 5 samples from test-on-test, 3 from test-on-train.
  r = cgdp("inspect --model m.prototxt --memory --stage test-on-test");
  EXPECT_NE(r.output.find("(test batch 5)"), std::string::npos) << r.output;
  r = cgdp("inspect --model m.prototxt --memory --stage test-on-train");
  EXPECT_NE(r.output.find("(test batch 3)"), std::string::npos) << r.output;
  r = cgdp("train --solver solver.prototxt --plain --display 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("4 train / 5 test samples"), std::string::npos) << r.output;
  r = cgdp(
      "train --model m.prototxt --iterations 2 --test-iter 1 --test-stage test-on-train --plain");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("4 train / 3 test samples"), std::string::npos) << r.output;
}

// Caffe's several test nets: one per test_state, each with its own test_iter, data layer and batch,
// reported by number at every test point (train) and by `cgdp test`.
TEST(DataLayers, EveryTestStateIsATestNetOfItsOwn) {
  testing::TempDir dir;
  std::ofstream(dir / "m.prototxt") << kStagedModel;
  std::ofstream(dir / "two.prototxt")
      << "net: \"m.prototxt\" max_iter: 2 base_lr: 0.1 solver_mode: CPU test_interval: 1 "
         "test_iter: 1 test_iter: 2 test_state { stage: \"test-on-test\" } "
         "test_state { stage: \"test-on-train\" }\n";
  const auto cgdp = [&](const std::string& args) {
    return testing::run_command(
        cat("cd ", dir.path(), " && ", testing::binary_dir(), "/cgdp ", args, " 2>&1"));
  };
  auto r = cgdp("train --solver two.prototxt --plain --save w.safetensors");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* line : {"test  iter 1  epoch 1.00  net #0 (stage test-on-test)  accuracy",
                           "test  iter 2  epoch 2.00  net #1 (stage test-on-train)  accuracy"})
    EXPECT_NE(r.output.find(line), std::string::npos) << line << " in " << r.output;
  // Synthetic test data (DummyData holds one batch): each net reads test_iter of its own batches.
  r = testing::run_command(cat("cd ", dir.path(), " && ", testing::binary_dir(),
                               "/cgdp test --solver two.prototxt --weights w.safetensors --json "
                               "--test-data synthetic:1,3,3,3"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  ASSERT_EQ(j["nets"].size(), 2u) << r.output;
  EXPECT_EQ(j["nets"][0]["net"], "#0 (stage test-on-test)");
  EXPECT_EQ(j["nets"][0]["samples"], 5);  // 1 batch of 5
  EXPECT_EQ(j["nets"][1]["net"], "#1 (stage test-on-train)");
  EXPECT_EQ(j["nets"][1]["samples"], 6);  // 2 batches of 3
  std::ofstream(dir / "bad.prototxt")
      << "net: \"m.prototxt\" test_iter: 1 test_state { stage: \"test-on-test\" } "
         "test_state { stage: \"test-on-train\" }\n";
  r = cgdp("train --solver bad.prototxt");
  EXPECT_NE(r.output.find("bad.prototxt: test_iter is given 1 times for 2 test nets (one per "
                          "test_state): give one test_iter per test net"),
            std::string::npos)
      << r.output;
}

// An autoencoder in the form of Caffe's MNIST example (tests/data/autoencoder): no labels, two
// parameterless layers named "loss", and its solver's two test nets by stage, both reported at
// every test point; synthetic data stand in for its LMDBs, small batches for CI.
TEST(DataLayers, CaffesAutoencoderTrainsWithBothTestNetsReported) {
  testing::TempDir dir;
  std::filesystem::create_directories(dir / "examples/mnist");
  for (const char* file : {"mnist_autoencoder.prototxt", "mnist_autoencoder_solver.prototxt"})
    std::filesystem::copy_file(cat(testing::source_dir(), "/tests/data/autoencoder/", file),
                               dir / "examples/mnist" / file);
  const auto r = testing::run_command(
      cat("cd ", dir.path(), " && ", testing::binary_dir(),
          "/cgdp train --solver examples/mnist/mnist_autoencoder_solver.prototxt --device-kind cpu "
          "--data synthetic:1,28,28,10 --batch 16 --test-batch 16 --test-iter 2 --iterations 6 "
          "--test-interval 6 --snapshot-every 0 --plain 2>&1"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::regex line(
      R"(test  iter (\d+) .* net #(\d) \(stage (test-on-\w+)\)  accuracy - \(no Accuracy layer\)  loss ([0-9.]+)  l2_error ([0-9.]+))");
  std::map<std::pair<int, int>, double> loss;  // (iteration, net)
  for (auto it = std::sregex_iterator(r.output.begin(), r.output.end(), line);
       it != std::sregex_iterator(); ++it) {
    const int net = std::stoi((*it)[2]);
    EXPECT_EQ((*it)[3], net == 0 ? "test-on-train" : "test-on-test");
    loss[{std::stoi((*it)[1]), net}] = std::stod((*it)[4]);
  }
  ASSERT_EQ(loss.size(), 4u)
      << r.output;  // both nets before the first iteration and after the last
  for (int net = 0; net < 2; ++net) EXPECT_LT((loss[{6, net}]), (loss[{0, net}])) << r.output;
}

TEST(PublishedCaffeFiles, EverySolverParses) {
  for (const char* file : {"examples/mnist/lenet_solver.prototxt", "examples/cifar10/cifar10_quick_solver.prototxt",
                           "models/bvlc_alexnet/solver.prototxt", "models/bvlc_googlenet/solver.prototxt",
                           "models/bvlc_googlenet/quick_solver.prototxt"})
    EXPECT_NO_THROW(load_solver((published_caffe_files() / file).string())) << file;
}

}  // namespace
}  // namespace cgdp
