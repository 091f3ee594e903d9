// The `cgdp` binary on bad input: one line on stderr naming the file and what is wrong, a
// non-zero exit, no crash; and its --help and inspect output.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <sstream>

#include "cgdp/core/error.hpp"
#include "cgdp/device/devices.hpp"
#include "cgdp/device/layer_precision.hpp"
#include "cgdp/io/checkpoint.hpp"
#include "cgdp/io/safetensors.hpp"
#include "cgdp/layers/bf16_kernel_isa.hpp"
#include "support/run_command.hpp"
#include "support/test_paths.hpp"

namespace cgdp {
namespace {

namespace fs = std::filesystem;

using Result = testing::CommandResult;

Result run(const std::string& args) {
  return testing::run_command(cat(testing::binary_dir(), "/cgdp ", args, " 2>&1"));
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / cat("cgdp_cli_", ::getpid());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    const fs::path p = dir_ / name;
    std::ofstream(p) << text;
    return p.string();
  }
  // Expects exactly one line "cgdp: error: ..." containing every `parts`, and exit 1.
  void expect_error(const std::string& args, std::initializer_list<std::string> parts) {
    const Result r = run(args);
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
    EXPECT_EQ(r.output.rfind("cgdp: error: ", 0), 0u) << r.output;
    for (const auto& part : parts) EXPECT_NE(r.output.find(part), std::string::npos) << part << " in " << r.output;
  }
  fs::path dir_;
};

const char* kInput = R"(layer { name: "data" type: "Input" top: "data" top: "label"
  input_param { shape { dim: 2 dim: 1 dim: 8 dim: 8 } shape { dim: 2 } } }
)";

TEST_F(Cli, MissingModelFile) {
  expect_error("inspect --model /nonexistent/m.prototxt", {"/nonexistent/m.prototxt", "no such file"});
}

TEST_F(Cli, SyntaxErrorGivesLineAndColumn) {
  const auto m = write("syntax.prototxt", std::string(kInput) + "layer { name: \"c\" type: \"ReLU\" bottom: \"data\" top: }\n");
  expect_error("inspect --model " + m, {m + ":3:52:"});
}

TEST_F(Cli, UnknownLayerTypeListsKnownTypes) {
  const auto m = write("type.prototxt", std::string(kInput) + "layer { name: \"c\" type: \"Convolutoin\" bottom: \"data\" top: \"c\" }\n");
  expect_error("inspect --model " + m, {"unknown type 'Convolutoin'", "Convolution", "Pooling"});
}

TEST_F(Cli, UnknownFillerNamesTheLayerAndLine) {
  const auto m =
      write("filler.prototxt",
            std::string(kInput) +
                "layer { name: \"ip\" type: \"InnerProduct\" bottom: \"data\" top: \"ip\"\n"
                "  inner_product_param { num_output: 2 weight_filler { type: \"xavierr\" } } }\n");
  expect_error("inspect --model " + m,
               {m + ":4: layer 'ip' (InnerProduct): inner_product_param.weight_filler.type: filler "
                    "'xavierr' is not implemented"});
}

TEST_F(Cli, ModelWithoutLossNamesTheFile) {
  const auto m =
      write("noloss.prototxt",
            std::string(kInput) +
                "layer { name: \"ip\" type: \"InnerProduct\" bottom: \"data\" top: \"ip\"\n"
                "  inner_product_param { num_output: 2 } }\n");
  expect_error("train --iterations 1 --model " + m,
               {m + ": the model has no loss layer to train (such as SoftmaxWithLoss)"});
}

TEST_F(Cli, UnknownFieldIsNamed) {
  const auto m = write("field.prototxt", std::string(kInput) + "layer { name: \"c\" type: \"ReLU\" colour: 1 }\n");
  expect_error("inspect --model " + m, {m + ":3:", "colour"});
}

TEST_F(Cli, BottomThatNoLayerProduces) {
  const auto m = write("bottom.prototxt", std::string(kInput) + "layer { name: \"r\" type: \"ReLU\" bottom: \"dta\" top: \"r\" }\n");
  expect_error("inspect --model " + m, {m, "layer 'r'", "bottom 'dta'"});
}

TEST_F(Cli, KernelLargerThanPaddedInput) {
  const auto m = write("kernel.prototxt", std::string(kInput) +
      "layer { name: \"conv\" type: \"Convolution\" bottom: \"data\" top: \"conv\" convolution_param { num_output: 2 kernel_size: 11 } }\n");
  expect_error("inspect --model " + m, {m, "layer 'conv'", "larger than the padded input"});
}

TEST_F(Cli, ConcatOfMismatchedShapes) {
  const auto m = write("concat.prototxt", std::string(kInput) +
      "layer { name: \"p\" type: \"Pooling\" bottom: \"data\" top: \"p\" pooling_param { kernel_size: 2 stride: 2 } }\n"
      "layer { name: \"cat\" type: \"Concat\" bottom: \"data\" bottom: \"p\" top: \"cat\" }\n");
  expect_error("inspect --model " + m, {m, "layer 'cat'"});
}

TEST_F(Cli, LabelCountThatIsNotTheBatch) {
  const auto m = write("labels.prototxt", R"(layer { name: "data" type: "Input" top: "data" top: "label"
  input_param { shape { dim: 2 dim: 3 } shape { dim: 2 dim: 2 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "data" bottom: "label" top: "loss" }
)");
  expect_error("inspect --model " + m, {m, "layer 'loss'", "labels"});
}

TEST_F(Cli, TruncatedIdxFile) {
  const fs::path d = dir_ / "idx";
  fs::create_directories(d);
  std::ofstream(d / "train-images-idx3-ubyte", std::ios::binary).write("\0\0\x08\x03\0\0\0\x02\0\0\0\x1c\0\0\0\x1c\x01\x02", 18);
  std::ofstream(d / "train-labels-idx1-ubyte", std::ios::binary).write("\0\0\x08\x01\0\0\0\x02\x01\x02", 10);
  expect_error(cat("train --iterations 1 --data idx:", d.string()), {"train-images-idx3-ubyte", "expected"});
}

TEST_F(Cli, WrongMagicIdxFile) {
  const fs::path d = dir_ / "idx";
  fs::create_directories(d);
  std::ofstream(d / "train-images-idx3-ubyte", std::ios::binary).write("\0\0\x08\x01\0\0\0\x02", 8);
  std::ofstream(d / "train-labels-idx1-ubyte", std::ios::binary).write("\0\0\x08\x01\0\0\0\x02\x01\x02", 10);
  expect_error(cat("train --iterations 1 --data idx:", d.string()), {"train-images-idx3-ubyte", "magic"});
}

// A data directory cgdp may not search was an internal error (a filesystem exception). Root
// reads anything, so as root the run drops to nobody (setpriv) to meet the permission bits.
TEST_F(Cli, DataDirectoryWithoutPermissionIsNamed) {
  const fs::path d = dir_ / "locked";
  fs::create_directories(d);
  fs::permissions(d, fs::perms::none);
  const std::string as_user =
      ::geteuid() == 0 ? "setpriv --reuid=65534 --regid=65534 --clear-groups " : "";
  const Result r = testing::run_command(
      cat(as_user, testing::binary_dir(), "/cgdp train --iterations 1 --data idx:", d.string(), " 2>&1"));
  fs::permissions(d, fs::perms::owner_all);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_EQ(r.output, cat("cgdp: error: ", (d / "train-images-idx3-ubyte.gz").string(),
                          ": cannot look at IDX image file: Permission denied\n"));
}

TEST_F(Cli, BadDeviceCountAndChunkPlansStopBeforeWork) {
  expect_error("train --devices 0", {"--devices"});
  expect_error("train --devices 2 --chunk 3,1", {"--chunk", "increasing"});
  expect_error("train --devices 2 --chunk bytes:-1", {"--chunk"});
  expect_error("train --devices 2 --timeline /nonexistent/dir/t.json", {"/nonexistent/dir/t.json"});
}

// Output paths are checked before the first iteration (one line: no progress was printed).
TEST_F(Cli, UnwritableOutputsStopBeforeTraining) {
  const std::string plain = write("plain_file", "x");
  expect_error("train --data synthetic --save /nonexistent/dir/final.safetensors",
               {"/nonexistent/dir/final.safetensors: cannot write the parameters (--save) ("});
  expect_error("train --data synthetic --snapshot-every 1 --snapshot-prefix " + plain + "/ck/run",
               {plain + "/ck: cannot create the directory for checkpoints (--snapshot-prefix) ("});
}

// Outputs replace their file whole through a rename, which had replaced a device (as root,
// /dev/full: the run "saved" and exited 0); an output naming an input overwrote it, and two
// outputs naming one file lost one. Each is now refused before training, and nothing is touched.
TEST_F(Cli, OutputsMustBeRegularFilesApartFromInputsAndEachOther) {
  const fs::path fifo = dir_ / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string model = write("m.prototxt", read_text(cat(testing::source_dir(),
                                                              "/models/fashion_cnn.prototxt")));
  const std::string out = (dir_ / "out.safetensors").string();
  expect_error("train --data synthetic --save " + fifo.string(),
               {fifo.string() + ": cannot write the parameters (--save) (it is a FIFO; cgdp "
                                "writes its outputs as regular files only)"});
  expect_error("train --data synthetic --timeline " + fifo.string(), {"it is a FIFO"});
  expect_error("train --data synthetic --metrics " + fifo.string(), {"it is a FIFO"});
  expect_error(cat("train --data synthetic --model ", model, " --save ", model),
               {"--save " + model + " is the file --model reads"});
  expect_error(cat("train --data synthetic --metrics ", out, " --save ", dir_.string(),
                   "/./out.safetensors"),
               {"--metrics and --save both name", "give each its own file"});
  EXPECT_TRUE(fs::is_fifo(fifo));
  EXPECT_EQ(read_text(model), read_text(cat(testing::source_dir(), "/models/fashion_cnn.prototxt")));
  EXPECT_FALSE(fs::exists(out));
}

// Counts past 2^31 - 1 that go to a 32-bit field had wrapped around (2^32 + 1 became 1: the lr
// of --stepsize 4294967297 decayed after every step, the poly horizon was 1); each is refused.
TEST_F(Cli, CountsPastThirtyTwoBitsAreRefusedNotWrapped) {
  const std::string big = " 4294967297: more than a 32-bit field holds (at most 2147483647)";
  expect_error("train --data synthetic --iterations 4294967297", {"--iterations" + big});
  expect_error("train --data synthetic --epochs 1e12", {"iterations of --epochs"});
  expect_error("train --data synthetic --lr-policy step --stepsize 4294967297",
               {"--stepsize" + big});
  expect_error("train --data synthetic --lr-policy multistep --stepvalues 10,4294967297",
               {"--stepvalues" + big});
  expect_error("train --data synthetic:1,28,28,4294967296 --iterations 1",
               {"data source 'synthetic:1,28,28,4294967296': classes 4294967296"});
}

// Sizes that come from a flag or a file are checked before anything is sized by them: a resize to
// 100000x100000 and a weights map's blob index of 2e9 had ended in std::bad_alloc (exit 3).
TEST_F(Cli, SizesFromFlagsAndFilesAreCheckedBeforeAllocating) {
  expect_error("convert --from folder:nowhere --to lmdb:never --resize 100000x100000",
               {"--resize 100000x100000: 100000 x 100000 is 10000000000 pixels, more than the "
                "268435456 (16384 x 16384) of the largest image cgdp makes"});
  const std::string map = write("map.txt", "fc.weight fc/2000000000\n");
  expect_error(
      "train --data synthetic --weights " + write("w.safetensors", "x") + " --weights-map " + map,
      {"map.txt:1: expected \"tensor_name layer/index\" (e.g. \"features.0.weight conv1/0\"; "
       "index 0 to 255), got \"fc.weight fc/2000000000\""});
}

// Numbers no setting means are refused where they enter, naming the flag or the file's line and
// field: a NaN lr_mult had trained to NaN weights and "test accuracy 1", --global-batch 0 and
// --threads 100000 were taken silently, --loader-threads 100000 crashed, a solver's max_iter: 0
// trained 8 epochs.
TEST_F(Cli, NumbersThatCannotBeMeantAreRefusedWhereTheyEnter) {
  const std::string fashion = read_text(cat(testing::source_dir(), "/models/fashion_cnn.prototxt"));
  std::string nan_lr = fashion, reversed = fashion;
  nan_lr.replace(nan_lr.find("lr_mult: 1"), 10, "lr_mult: nan");
  reversed.replace(reversed.find("type: \"xavier\""), 14, "type: \"uniform\" min: 1 max: -1");
  expect_error("train --data synthetic --model " + write("nan.prototxt", nan_lr),
               {"nan.prototxt:27: layer 'conv1' (Convolution): param.lr_mult: expected a finite "
                "number, got nan"});
  expect_error("train --data synthetic --model " + write("uniform.prototxt", reversed),
               {"weight_filler.min: uniform filler from min 1 to max -1: min is above max"});
  expect_error("train --data synthetic --global-batch 0", {"--global-batch: must be > 0, got 0"});
  expect_error("train --data synthetic --threads 100000", {"--threads: at most 4096, got 100000"});
  expect_error("train --data synthetic --loader-threads 100000",
               {"--loader-threads: at most 4096"});
  expect_error("train --data synthetic --mean-value 1,nan,2",
               {"--mean-value: expected a finite number, got nan"});
  expect_error("train --data synthetic --pixel-scale inf",
               {"--pixel-scale: expected a finite number, got inf"});
  expect_error("train --data ''", {"--data: expected a value, got an empty one"});
  const std::string model = write("m.prototxt", fashion);
  for (const auto& [field, value] :
       {std::pair{"max_iter", "0"}, std::pair{"test_iter", "-2"}, std::pair{"iter_size", "0"}}) {
    const std::string solver =
        write(cat(field, ".prototxt"),
              cat("net: '", model, "' base_lr: 0.01 solver_mode: CPU ", field, ": ", value, "\n"));
    expect_error("train --data synthetic --solver " + solver,
                 {cat(solver, ": ", field, ": ", value, ": expected a count > 0")});
  }
}

// Messages that named the library instead of the problem: an unknown command (CLI11: "A
// subcommand is required"), JSON errors tagged "[json.exception.parse_error.101]" (a number past
// a double was an internal error, exit 3), a GPU run asked for by a solver file's default
// solver_mode blamed on --device-kind.
TEST_F(Cli, UnclearMessagesNameWhatIsWrong) {
  expect_error("trian",
               {"unknown command 'trian' (did you mean 'train'?); the commands are train"});
  const std::string huge = write("huge.json", "{\"sync_us\": 1e999}");
  expect_error("predict --model alexnet --profile " + huge,
               {huge + ": not valid JSON: number overflow parsing '1e999'"});
  const Result cut = run("predict --model alexnet --profile " + write("cut.json", "{\"a\": "));
  EXPECT_EQ(cut.exit_code, 1) << cut.output;
  EXPECT_EQ(cut.output.find("json.exception"), std::string::npos) << cut.output;
  if (cuda_device_count() == 0) {  // with a GPU the run would start
    const std::string model =
        write("m.prototxt", read_text(cat(testing::source_dir(), "/models/fashion_cnn.prototxt")));
    const std::string solver = write("gpu.prototxt", cat("net: '", model, "' base_lr: 0.01\n"));
    expect_error("train --data synthetic --solver " + solver,
                 {solver + ": solver_mode: GPU (Caffe's default; --device-kind cpu, or "
                           "solver_mode: CPU, for the CPU): "});
  }
}

// Inputs that had been echoed whole, blamed on the wrong thing, or not named: a 200,000-character
// layer type, a weights file holding NaN ("try a lower learning rate"), a checkpoint whose data
// position or iteration no run has (an internal check, or the sampler without the file's name),
// a resume at the run's last iteration.
TEST_F(Cli, InputsThatWereEchoedOrBlamedWronglyAreNamed) {
  const Result type = run("inspect --model " +
                          write("long.prototxt", "layer { name: 'a' type: '" +
                                                     std::string(200000, 'X') + "' top: 'a' }\n"));
  EXPECT_EQ(type.exit_code, 1);
  EXPECT_NE(type.output.find("unknown type 'XXXX"), std::string::npos)
      << type.output.substr(0, 300);
  EXPECT_NE(type.output.find("XXX... (200000 characters)' (known: "), std::string::npos);
  EXPECT_LT(type.output.size(), 2000u);
  const fs::path ck = dir_ / "ck";
  const Result trained = run(
      cat("train --data synthetic --iterations 1 --plain --test-interval -1 --test-samples 100 ",
          "--snapshot-every 1 --snapshot-prefix ", (ck / "run").string(), " --save ",
          (dir_ / "w.safetensors").string()));
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  SafetensorsFile weights(read_text((dir_ / "w.safetensors").string()), "w");
  std::string bytes = read_text((dir_ / "w.safetensors").string());
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(bytes.data() + weights.header_section().size(), &nan, sizeof nan);  // the first value
  expect_error(
      "train --data synthetic --iterations 1 --weights " + write("nan.safetensors", bytes),
      {"nan.safetensors: layer 'conv1' blob 0 holds nan at element 0: a diverged or damaged file"});
  const std::string checkpoint = (ck / "run_iter_1.ckpt").string();
  for (const auto& [field, what] :
       {std::pair{"offset",
                  "its data position (epoch 0, sample 1000000000) is past the training "
                  "set's "},
        std::pair{"iteration", "checkpoint metadata \"iteration\" is -5; expected a count >= 0"}}) {
    Checkpoint c = load_checkpoint(checkpoint);
    (std::string(field) == "offset" ? c.offset : c.iteration) =
        std::string(field) == "offset" ? 1000000000 : -5;
    const std::string edited = (dir_ / cat(field, ".ckpt")).string();
    save_checkpoint(edited, c);
    expect_error("train --data synthetic --iterations 2 --resume " + edited,
                 {edited + ": " + what});
  }
  // Had printed "done: 1 iterations, test accuracy 0" without a test.
  expect_error(
      "train --data synthetic --iterations 1 --resume " + checkpoint,
      {checkpoint + ": the checkpoint is at iteration 1, and this run ends at 1: nothing is "
                    "left to train"});
}

// --precision bf16|fp16 (issue 36): the start says which kernels multiply in 16 bits (oneDNN's
// bf16 ones where the CPU has AVX512_BF16, fp32 ones on rounded operands elsewhere), fp16 says
// its loss scale; what does not run is refused naming the flag.
TEST_F(Cli, SixteenBitPrecisionSaysWhichKernelsRunIt) {
  const std::string run16 =
      "train --data synthetic --iterations 2 --plain --test-samples 100 --precision ";
  const Result bf16 = run(run16 + "bf16");
  EXPECT_EQ(bf16.exit_code, 0) << bf16.output;
  // fashion_cnn: conv1 (1 channel) stays on GEMM; conv2 and the two inner products are oneDNN's.
  const std::string kernels =
      cpu_has_bf16()
          ? cat("cgdp: precision bf16: 3 of 4 multiplying layers on oneDNN's bf16 kernels (",
                bf16_kernel_isa(), "), 1 on fp32 kernels with their operands rounded to bf16")
          : "cgdp: precision bf16: 4 multiplying layers on fp32 kernels with "
            "their operands rounded to bf16 (this CPU has no bf16 kernels";
  EXPECT_NE(bf16.output.find(kernels), std::string::npos) << bf16.output;
  EXPECT_EQ(bf16.output.find("loss scale"), std::string::npos) << "bf16 needs no loss scale";
  const Result fp16 = run(run16 + "fp16");
  EXPECT_EQ(fp16.exit_code, 0) << fp16.output;
  for (const char* line : {"cgdp: precision fp16: 4 multiplying layers on fp32 kernels with their "
                           "operands rounded to fp16",
                           "cgdp: loss scale 65536, dynamic: a step with a non-finite gradient is "
                           "skipped and halves it",
                           "cgdp: loss scale 65536 at the end; 0 step(s) skipped"})
    EXPECT_NE(fp16.output.find(line), std::string::npos) << line << "\n" << fp16.output;
  expect_error("train --data synthetic --precision int8",
               {"--precision int8: expected fp32, bf16 or fp16"});
  expect_error("train --data synthetic --precision fp16 --loss-scale 0.5",
               {"--loss-scale 0.5: expected auto, off, dynamic, dynamic:START or a fixed scale"});
}

// `cgdp time` (caffe time): a row per layer of the net in forward order, and totals that are the
// rows' sums; a ReLU its convolution runs says so.
TEST_F(Cli, TimePrintsEveryLayerAndTheirTotals) {
  const Result r =
      run("time --model fashion_cnn --data synthetic --batch 4 --iterations 2 --warmup 1 "
          "--threads 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::istringstream lines(r.output);
  std::string line;
  std::vector<std::string> names;
  std::map<std::string, std::string> rows;
  double forward = 0, backward = 0, total_forward = -1, total_backward = -1, both = -1;
  while (std::getline(lines, line)) {
    std::istringstream row(line);
    std::string name, type;
    double f = 0, b = 0;
    if (line.starts_with("  all ")) {
      std::string all, count, layers;
      row >> all >> count >> layers >> total_forward >> total_backward;
    } else if (line.starts_with("  forward-backward: ")) {
      both = std::stod(line.substr(20));
    } else if (line.starts_with("  ") && !line.starts_with("  layer") &&
               (row >> name >> type >> f >> b)) {
      names.push_back(name);
      rows[name] = line;
      forward += f, backward += b;
    }
  }
  EXPECT_EQ(names, (std::vector<std::string>{"data", "conv1", "relu1", "pool1", "conv2", "relu2",
                                             "pool2", "ip1", "relu3", "drop1", "ip2", "loss"}))
      << r.output;
  EXPECT_TRUE(rows["relu1"].ends_with("  in conv1")) << r.output;  // absorbed on the CPU
  EXPECT_TRUE(rows["relu3"].ends_with(" 0.000")) << r.output;      // after ip1: its own layer
  EXPECT_GT(total_backward, 0) << r.output;
  EXPECT_NEAR(total_forward, forward, 0.01) << r.output;  // printed to 3 decimals
  EXPECT_NEAR(total_backward, backward, 0.01) << r.output;
  EXPECT_NEAR(both, total_forward + total_backward, 0.002) << r.output;
  expect_error("time --model fashion_cnn --data synthetic --iterations 0", {"--iterations"});
  // A Scale inside its BatchNorm: each row says where the other's pass runs.
  const Result resnet =
      run("time --model resnet_small --data synthetic --batch 2 --iterations 1 --warmup 1 "
          "--threads 1");
  ASSERT_EQ(resnet.exit_code, 0) << resnet.output;
  EXPECT_NE(resnet.output.find("runs scale_conv1's forward; backward in scale_conv1\n"),
            std::string::npos)
      << resnet.output;
  EXPECT_NE(resnet.output.find("forward in bn_conv1; runs bn_conv1's backward\n"),
            std::string::npos)
      << resnet.output;
}

// Opening a FIFO blocks until a writer comes: one given as the model, the weights, a profile, an
// image list or an IDX file had hung the run forever. Each is refused at once (the timeout
// turns a hang into a failure here rather than a stuck CI).
TEST_F(Cli, FifosAsInputsAreRefusedNotWaitedOn) {
  const fs::path fifo = dir_ / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const fs::path idx = dir_ / "idx";
  fs::create_directories(idx);
  for (const char* name : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                           "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"})
    ASSERT_EQ(::mkfifo((idx / name).c_str(), 0600), 0);
  const std::string refused = ", not a regular file (cgdp reads its inputs from regular files)";
  const std::string quick = "timeout 20 " + testing::binary_dir() + "/cgdp ";
  for (const std::string& args :
       {"train --iterations 1 --model " + fifo.string(),
        "train --data synthetic --iterations 1 --weights " + fifo.string(),
        "predict --model alexnet --profile " + fifo.string(),
        "train --iterations 1 --data list:" + fifo.string(),
        "train --iterations 1 --data idx:" + idx.string()}) {
    SCOPED_TRACE(args);
    const Result r = testing::run_command(quick + args + " 2>&1");
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find(": is a FIFO" + refused), std::string::npos) << r.output;
  }
  EXPECT_TRUE(fs::is_fifo(fifo));
}

// What a kill -9 during a snapshot left is removed at the next start of the same prefix.
TEST_F(Cli, StaleCheckpointTemporariesAreRemovedAtStart) {
  const fs::path ck = dir_ / "ck";
  fs::create_directories(ck);
  std::ofstream(ck / "run_iter_4.ckpt.tmp.999999999") << "half a checkpoint";
  const Result r =
      run(cat("train --data synthetic --iterations 2 --plain --test-interval -1 ",
              "--test-samples 100 --snapshot-every 2 --snapshot-prefix ", (ck / "run").string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(
      r.output.find(cat("cgdp: removed 1 unfinished checkpoint file(s) left in ", ck.string())),
      std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(ck / "run_iter_4.ckpt.tmp.999999999"));
  EXPECT_TRUE(fs::exists(ck / "run_iter_2.ckpt"));
}

// CLI11's own range check printed the whole range of a double (385 characters).
TEST_F(Cli, FlagRangeErrorsAreOneShortLine) {
  const Result batch = run("train --batch 0");
  EXPECT_NE(batch.exit_code, 0);
  EXPECT_EQ(batch.output, "cgdp: error: --batch: must be > 0, got 0 (see --help)\n");
  EXPECT_EQ(run("train --lr -1").output, "cgdp: error: --lr: must be > 0, got -1 (see --help)\n");
  EXPECT_EQ(run("inspect --batch x").output,
            "cgdp: error: --batch: expected a number, got 'x' (see --help)\n");
}

// --devices 1000 grew to 17 GB with no output; now the count is bounded before anything is built.
TEST_F(Cli, MoreWorkersThanCoresNeedOversubscribe) {
  cpu_set_t set;
  ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  const int cores = CPU_COUNT(&set);
  expect_error("train --data synthetic --iterations 1 --devices 1000",
               {"--devices 1000: more CPU workers than the ", cat(cores, " cores"), "--oversubscribe"});
  expect_error(cat("profile --out ", (dir_ / "p.json").string(), " --data synthetic --devices ", cores + 1),
               {"--oversubscribe"});
  const Result over = run(cat("train --data synthetic --batch 2 --test-batch 2 --test-samples 2 "
                              "--iterations 1 --plain --devices ", cores + 1, " --oversubscribe"));
  EXPECT_EQ(over.exit_code, 0) << over.output;
  EXPECT_NE(over.output.find("cgdp: done: 1 iterations"), std::string::npos) << over.output;
}

TEST_F(Cli, ImageFlagsAndConvertRefuseBadInputInOneLine) {
  expect_error("train --data synthetic --resize 0x4", {"--resize: expected HxW with two positive integers, got '0x4'"});
  expect_error("convert --from bogus:x --to lmdb:" + (dir_ / "db").string(),
               {"--from 'bogus:x': expected folder:DIR or list:FILE[,ROOT]"});
  expect_error("convert --from folder:" + dir_.string() + " --to leveldb:x", {"--to 'leveldb:x': expected lmdb:PATH"});
  expect_error("train --data folder:" + (dir_ / "none").string(), {"none/train: no such folder"});
  EXPECT_FALSE(fs::exists(dir_ / "db"));
}

TEST_F(Cli, DivergenceNamesIterationAndLayer) {
  const Result r = run("train --data synthetic --iterations 30 --lr 1e12 --plain --display 1");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  const std::string last = r.output.substr(r.output.rfind('\n', r.output.size() - 2) + 1);
  EXPECT_EQ(last.rfind("cgdp: error: iteration ", 0), 0u) << r.output;
  EXPECT_NE(last.find("first non-finite output in layer '"), std::string::npos) << last;
  // The failing iteration is the one after the last that progress showed (both count from 1).
  const size_t shown = r.output.rfind("\niter ");
  ASSERT_NE(shown, std::string::npos) << r.output;
  const int last_shown = std::stoi(r.output.substr(shown + 6));
  EXPECT_EQ(std::stoi(last.substr(std::string("cgdp: error: iteration ").size())), last_shown + 1)
      << r.output;
}

TEST_F(Cli, HelpListsTheSubcommandsAndTrainFlags) {
  const Result top = run("--help");
  EXPECT_EQ(top.exit_code, 0);
  for (const char* s : {"train", "inspect", "topo"}) EXPECT_NE(top.output.find(s), std::string::npos) << s;
  const Result train = run("train --help");
  for (const char* s : {"--model", "--data", "--batch", "--epochs", "--lr", "--devices", "--sync", "--chunk",
                        "--timeline", "--metrics", "--save", "--snapshot-every", "--resume"})
    EXPECT_NE(train.output.find(s), std::string::npos) << s;
}

TEST_F(Cli, InspectPrintsTotalAndJson) {
  const Result table = run("inspect --model fashion_cnn");
  EXPECT_EQ(table.exit_code, 0) << table.output;
  EXPECT_NE(table.output.find("total learnable parameters: 857738"), std::string::npos) << table.output;
  const Result json = run("inspect --model fashion_cnn --json");
  EXPECT_NE(json.output.find("\"total_params\": 857738"), std::string::npos) << json.output;
}

}  // namespace
}  // namespace cgdp
