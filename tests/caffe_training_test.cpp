// Caffe's solver files run as Caffe runs them: the net found where Caffe users expect it, every
// field mapped (max_iter, display, test_interval, test_iter, snapshot...), flags overriding the
// file; each published solver trains its net on small data; test figures by layer type.
#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>

#include "cgdp/caffe_import/solver_file.hpp"
#include "cgdp/net/graph_rewrite.hpp"
#include "cgdp/net/model_file.hpp"
#include "support/caffe_tree.hpp"
#include "support/run_command.hpp"
#include "support/test_paths.hpp"

namespace cgdp {
namespace {

using testing::CaffeTree;
using testing::published_caffe_files;

testing::CommandResult cgdp_in(const std::filesystem::path& dir, const std::string& args) {
  return testing::run_command(cat("cd ", dir, " && ", testing::binary_dir(), "/cgdp ", args, " 2>&1"));
}

int count_of(const std::string& text, const std::string& part) {
  int n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

TEST(SolverFile, LeNetsSolverMapsEveryField) {
  const CaffeTree tree;
  const auto cwd = std::filesystem::current_path();
  std::filesystem::current_path(tree.root());
  const std::string path = "examples/mnist/lenet_solver.prototxt";
  TrainConfig c;
  c.solver = load_solver(path);
  apply_solver_file(c.solver, path, {}, c);
  std::filesystem::current_path(cwd);
  EXPECT_EQ(c.model, "examples/mnist/lenet_train_test.prototxt");
  EXPECT_EQ(c.iterations, 10000);
  EXPECT_EQ(c.display, 100);
  EXPECT_EQ(c.test_iter, 100);
  EXPECT_EQ(c.test_interval, 500);
  EXPECT_TRUE(c.test_initialization);
  EXPECT_EQ(c.snapshot_every, 5000);
  EXPECT_EQ(c.snapshot_prefix, "examples/mnist/lenet");
  EXPECT_TRUE(c.snapshot_after_train);
  EXPECT_EQ(c.device_kind, "cuda");  // solver_mode: GPU
  EXPECT_EQ(c.solver.lr_policy(), "inv");
  EXPECT_FLOAT_EQ(c.solver.gamma(), 0.0001f);
  EXPECT_FLOAT_EQ(c.solver.momentum(), 0.9f);
}

TEST(SolverFile, FlagsTheUserGaveKeepTheirValues) {
  const std::string path = (published_caffe_files() / "examples/mnist/lenet_solver.prototxt").string();
  TrainConfig c;
  c.model = "mine.prototxt";
  c.iterations = 7;
  c.device_kind = "cpu";
  c.solver = load_solver(path);
  apply_solver_file(c.solver, path, {"--model", "--iterations", "--device-kind"}, c);
  EXPECT_EQ(c.model, "mine.prototxt");
  EXPECT_EQ(c.iterations, 7);
  EXPECT_EQ(c.device_kind, "cpu");
  EXPECT_EQ(c.display, 100);  // not given: the file's
}

// From another folder, `net:` is found beside the solver file; neither place is one line.
TEST(SolverFile, TheNetIsFoundBesideTheSolverFile) {
  testing::TempDir dir;
  std::filesystem::create_directories(dir / "run");
  std::ofstream(dir / "s.prototxt") << "net: \"lenet.prototxt\" base_lr: 0.01\n";
  std::ofstream(dir / "lenet.prototxt") << "name: \"x\"\n";
  const auto cwd = std::filesystem::current_path();
  std::filesystem::current_path(dir / "run");
  const proto::SolverParameter s = load_solver("../s.prototxt");
  EXPECT_EQ(solver_net_path(s, "../s.prototxt"), "../lenet.prototxt");
  std::ofstream("../t.prototxt") << "net: \"elsewhere.prototxt\"\n";
  try {
    (void)solver_net_path(load_solver("../t.prototxt"), "../t.prototxt");
    ADD_FAILURE() << "no error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("\"elsewhere.prototxt\" is neither in the working directory"),
              std::string::npos) << e.what();
  }
  std::filesystem::current_path(cwd);
}

TEST(SolverFile, UnimplementedFieldsAreNamedWithTheirLines) {
  testing::TempDir dir;
  std::ofstream(dir / "s.prototxt")
      << "net: \"n.prototxt\"\nbase_lr: 0.1\nregularization_type: \"L1\"\n"
         "snapshot_format: HDF5\ntest_net_param { name: \"t\" }\nlr_polcy: \"step\"\n";
  try {
    (void)load_solver((dir / "s.prototxt").string());
    ADD_FAILURE() << "no error";
  } catch (const ModelError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("s.prototxt:3: regularization_type: cgdp regularises with L2 only"), std::string::npos) << m;
    EXPECT_NE(m.find("s.prototxt:4: snapshot_format: cgdp writes no HDF5 snapshots"), std::string::npos) << m;
    EXPECT_NE(m.find("s.prototxt:5: test_net_param: write the net to its own file"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("s.prototxt:6:9: unknown field 'lr_polcy'"), std::string::npos) << m;
  }
}

// max_iter, display, test_interval, test_iter and snapshot do what they say, from the file.
TEST(SolverFile, ItsCountsDriveTheRun) {
  const CaffeTree tree;
  std::ofstream(tree.root() / "examples/mnist/short_solver.prototxt")
      << "net: \"examples/mnist/lenet_train_test.prototxt\"\n"
         "base_lr: 0.01 momentum: 0.9 weight_decay: 0.0005 lr_policy: \"inv\" gamma: 0.0001 power: 0.75\n"
         "max_iter: 6 display: 2 test_iter: 1 test_interval: 3 snapshot: 3\n"
         "snapshot_prefix: \"snaps/lenet\" solver_mode: CPU\n";
  const auto r = cgdp_in(tree.root(), "train --solver examples/mnist/short_solver.prototxt --batch 4 "
                                      "--test-batch 4 --plain");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* line : {"iter 2/6", "iter 4/6", "iter 6/6", "test  iter 0 ", "test  iter 3 ", "test  iter 6 "})
    EXPECT_NE(r.output.find(line), std::string::npos) << line << "\n" << r.output;
  EXPECT_EQ(count_of(r.output, "test  iter"), 3) << r.output;
  EXPECT_EQ(count_of(r.output, "\niter "), 3) << r.output;
  EXPECT_TRUE(std::filesystem::exists(tree.root() / "snaps/lenet_iter_3.ckpt"));
  EXPECT_TRUE(std::filesystem::exists(tree.root() / "snaps/lenet_iter_6.ckpt"));
  EXPECT_NE(r.output.find("done: 6 iterations"), std::string::npos) << r.output;
}

// Caffe's older solvers name a train_net and a test_net file: LeNet split by phase into two files
// trains and tests exactly as its one train_test file does (the test net shares the parameters
// by layer name and reads its own file's data layer).
TEST(SolverFile, TrainNetAndTestNetFilesTrainAsTheirMergedFile) {
  const CaffeTree tree;
  const auto mnist = tree.root() / "examples/mnist";
  const proto::NetParameter merged = load_model((mnist / "lenet_train_test.prototxt").string());
  for (const auto& [phase, file] : {std::pair{Phase::Train, "lenet_train.prototxt"},
                                    std::pair{Phase::Test, "lenet_test.prototxt"}}) {
    std::string text;
    ASSERT_TRUE(google::protobuf::TextFormat::PrintToString(filter_phase(merged, phase), &text));
    std::ofstream(mnist / file) << text;
  }
  const std::string common =
      "base_lr: 0.01 momentum: 0.9 lr_policy: \"fixed\" max_iter: 4 display: 2 "
      "test_iter: 1 test_interval: 2 solver_mode: CPU\n";
  std::ofstream(mnist / "one_file_solver.prototxt")
      << "net: \"examples/mnist/lenet_train_test.prototxt\"\n"
      << common;
  std::ofstream(mnist / "two_files_solver.prototxt")
      << "train_net: \"examples/mnist/lenet_train.prototxt\"\n"
         "test_net: \"examples/mnist/lenet_test.prototxt\"\n"
      << common;
  auto test_lines = [&](const char* solver) {
    const auto r = cgdp_in(tree.root(), cat("train --solver examples/mnist/", solver,
                                            " --batch 4 --test-batch 4 --plain"));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    std::string lines;
    std::istringstream in(r.output);
    for (std::string line; std::getline(in, line);)
      if (line.starts_with("test  iter")) lines += line.substr(0, line.find("  elapsed")) + "\n";
    return lines;
  };
  const std::string one = test_lines("one_file_solver.prototxt");
  EXPECT_EQ(count_of(one, "accuracy"), 3) << one;  // iterations 0, 2 and 4
  EXPECT_EQ(test_lines("two_files_solver.prototxt"), one);
  std::ofstream(mnist / "bad_solver.prototxt")
      << "train_net: \"examples/mnist/lenet_train.prototxt\"\ntest_net: "
         "\"examples/mnist/lenet_test.prototxt\"\n"
         "test_iter: 1 test_iter: 1\n";
  const auto bad = cgdp_in(tree.root(), "train --solver examples/mnist/bad_solver.prototxt");
  EXPECT_NE(
      bad.output.find(
          "bad_solver.prototxt: test_iter is given 2 times for 1 test net (one per test_net)"),
      std::string::npos)
      << bad.output;
}

// Each published solver trains its published net a few iterations on the tree's small data.
TEST(SolverFile, EachPublishedSolverTrainsItsNet) {
  const CaffeTree tree;
  for (const char* solver : {"examples/mnist/lenet_solver.prototxt", "examples/cifar10/cifar10_quick_solver.prototxt",
                             "models/bvlc_alexnet/solver.prototxt", "models/bvlc_googlenet/quick_solver.prototxt"}) {
    const auto r = cgdp_in(tree.root(), cat("train --solver ", solver, " --device-kind cpu --iterations 2 --batch 2 "
                                                                       "--test-batch 2 --test-iter 1 --plain"));
    EXPECT_EQ(r.exit_code, 0) << solver << "\n" << r.output;
    EXPECT_NE(r.output.find("done: 2 iterations"), std::string::npos) << solver << "\n" << r.output;
    EXPECT_EQ(r.output.find("nan"), std::string::npos) << solver << "\n" << r.output;
  }
}

// Caffe's Siamese example as published: pairs of digits as two channels, sliced into two towers
// that share every weight by name, and a contrastive loss. One tower's parameters, counted once.
TEST(WeightSharing, CaffesSiameseExampleTrains) {
  const CaffeTree tree;
  const auto r = cgdp_in(tree.root(), "train --solver examples/siamese/mnist_siamese_solver.prototxt --device-kind cpu "
                                      "--iterations 20 --batch 4 --test-batch 4 --test-iter 1 --display 10 --plain");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // conv1 520 + conv2 25,050 + ip1 400,500 + ip2 5,010 + feat 22, shared by both towers.
  EXPECT_NE(r.output.find(" 431102 parameters)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("done: 20 iterations"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("(no Accuracy layer)"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("nan"), std::string::npos) << r.output;
}

// GoogLeNet names its accuracies loss3/top-1 and loss3/top-5: found by type, every one reported.
TEST(TestFigures, AccuracyIsFoundByLayerTypeAndEveryOutputIsReported) {
  testing::TempDir dir;
  std::ofstream(dir / "m.prototxt") << R"(
    layer { name: "data" type: "Input" top: "data" top: "label"
            input_param { shape { dim: 4 dim: 1 dim: 4 dim: 4 } shape { dim: 4 } } }
    layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip" inner_product_param { num_output: 10 } }
    layer { name: "loss3/loss3" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss3/loss3" }
    layer { name: "loss3/top-1" type: "Accuracy" bottom: "ip" bottom: "label" top: "loss3/top-1" include { phase: TEST } }
    layer { name: "loss3/top-5" type: "Accuracy" bottom: "ip" bottom: "label" top: "loss3/top-5" include { phase: TEST }
            accuracy_param { top_k: 5 } }
  )";
  const auto r = cgdp_in(dir.path(), "train --model m.prototxt --data synthetic:1,4,4,10 --iterations 2 --plain "
                                     "--test-samples 40 --metrics m.jsonl");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::regex line(R"(test  iter 2  epoch [0-9.]+  accuracy (0\.[0-9]{4}|1\.0000)  loss [0-9.]+  loss3/top-5 [0-9.]+)");
  EXPECT_TRUE(std::regex_search(r.output, line)) << r.output;
  std::ifstream metrics(dir / "m.jsonl");
  const std::string json((std::istreambuf_iterator<char>(metrics)), {});
  EXPECT_NE(json.find("\"loss3/top-5\""), std::string::npos) << json;
}

// Two towers sharing their weights by name train on two workers: the shared blob is exchanged
// once and the loss goes down.
TEST(WeightSharing, ASiameseStyleNetTrainsOnTwoWorkers) {
  testing::TempDir dir;
  std::ofstream(dir / "m.prototxt") << R"(
    layer { name: "data" type: "Input" top: "data" top: "label"
            input_param { shape { dim: 8 dim: 1 dim: 28 dim: 28 } shape { dim: 8 } } }
    layer { name: "a" type: "InnerProduct" bottom: "data" top: "a" param { name: "w" } param { name: "b" }
            inner_product_param { num_output: 10 weight_filler { type: "xavier" } } }
    layer { name: "b" type: "InnerProduct" bottom: "data" top: "b" param { name: "w" } param { name: "b" }
            inner_product_param { num_output: 10 weight_filler { type: "xavier" } } }
    layer { name: "sum" type: "Eltwise" bottom: "a" bottom: "b" top: "s" eltwise_param { coeff: 1 coeff: 0.5 } }
    layer { name: "loss" type: "SoftmaxWithLoss" bottom: "s" bottom: "label" top: "loss" }
  )";
  const auto r = cgdp_in(dir.path(), "train --model m.prototxt --data idx:/usr/share/datasets/fashion-mnist --iterations 100 --devices 2 "
                                     "--oversubscribe --lr 0.01 --display 20 --plain --test-samples 16 --metrics m.jsonl");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(" 7850 parameters)"), std::string::npos) << r.output;  // 784 x 10 + 10, once
  std::ifstream metrics(dir / "m.jsonl");
  std::vector<double> losses;
  for (std::string line; std::getline(metrics, line);)
    if (line.find("\"phase\":\"train\"") != std::string::npos) {
      const size_t at = line.find("\"loss\":");
      losses.push_back(std::stod(line.substr(at + 7)));
    }
  ASSERT_GE(losses.size(), 2u);
  EXPECT_LT(losses.back(), losses.front() * 0.7) << r.output;
}

TEST(TestFigures, ATestNetWithoutALossSaysSo) {
  testing::TempDir dir;
  std::ofstream(dir / "m.prototxt") << R"(
    layer { name: "data" type: "Input" top: "data" top: "label"
            input_param { shape { dim: 4 dim: 1 dim: 4 dim: 4 } shape { dim: 4 } } }
    layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip" inner_product_param { num_output: 10 } }
    layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" include { phase: TRAIN } }
    layer { name: "acc" type: "Accuracy" bottom: "ip" bottom: "label" top: "acc" include { phase: TEST } }
  )";
  const auto r = cgdp_in(dir.path(), "train --model m.prototxt --data synthetic:1,4,4,10 --iterations 1 --plain "
                                     "--test-samples 8");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("loss - (no loss layer in the TEST net)"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace cgdp
