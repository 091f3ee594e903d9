// The up-front memory check: the estimate equals what the workers then allocate, measuring a net
// commits none of its memory, and a run that does not fit is refused in one line before any
// allocation, naming its largest parts and the flags that shrink them.
#include "cgdp/train/memory_estimate.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "cgdp/cost/fc_exchange.hpp"
#include "cgdp/device/conv_algorithm_table.hpp"
#include "cgdp/device/cuda_options.hpp"
#include "cgdp/device/devices.hpp"
#include "cgdp/device/layer_precision.hpp"
#include "cgdp/device/measuring_device.hpp"
#include "cgdp/io/file.hpp"
#include "cgdp/layers/lrn_layer.hpp"
#include "cgdp/net/model_file.hpp"
#include "cgdp/tensor/channel_blocks.hpp"
#include "cgdp/train/trainer.hpp"
#include "support/run_command.hpp"
#include "support/temp_dir.hpp"
#include "support/test_paths.hpp"

namespace cgdp {
namespace {

namespace fs = std::filesystem;

TrainConfig small_run(const std::string& model, int devices, const std::string& sync) {
  TrainConfig c;
  c.model = model;
  c.data = "synthetic";
  c.batch = 4;
  c.test_batch = 6;
  c.devices = devices;
  c.sync = sync;
  c.iterations = 1;
  c.solver.set_base_lr(0.01f);
  c.plain_output = true;
  return c;
}

// The resident set of this process, from /proc/self/statm (pages).
int64_t resident_bytes() {
  std::ifstream in("/proc/self/statm");
  int64_t size = 0, resident = 0;
  in >> size >> resident;
  return resident * ::sysconf(_SC_PAGESIZE);
}

struct Case {
  const char* model;
  int devices;
  const char* sync;
  const char* precision = "fp32";  // bf16: activations planned, most of them packed
  const char* fc_exchange = "auto";  // factors: cgdp keeps every worker's rows of the weights
};

class EstimateMatches : public ::testing::TestWithParam<Case> {};

TEST_P(EstimateMatches, WhatTheWorkersAllocate) {
  const Case k = GetParam();
  FILE* sink = std::fopen("/dev/null", "w");
  TrainConfig c = small_run(k.model, k.devices, k.sync);
  c.precision = k.precision;
  c.pack_activations = "on";
  c.fc_exchange = k.fc_exchange;
  Trainer t(c, sink);
  std::fclose(sink);
  const proto::NetParameter model = load_model(find_model_file(k.model));
  const Precision precision = parse_precision(k.precision);
  const ScopedLayerPrecision layers_in(precision);
  MemoryEstimate m = estimate_memory(model, k.model, 4, 6, k.devices, parse_sync_kind(k.sync), 1,
                                     nullptr, "", default_activation_memory(precision));
  const std::vector<bool> factored = factored_without_model(
      m.params, parse_fc_exchange(k.fc_exchange), DeviceKind::Cpu, 4, k.devices);
  add_factor_buffers(m, m.sync, factored, 1, k.devices, ExchangeDtype::Fp32);
  EXPECT_EQ(m.exchange_factors > 0, std::string(k.fc_exchange) == "factors");
  EXPECT_EQ(m.packed > 0, is_16_bit(precision));
  for (int w = 0; w < k.devices; ++w) {
    EXPECT_EQ(t.workers()[w].device->memory_stats().device_bytes, m.worker_bytes(w)) << "worker " << w;
    EXPECT_LE(t.workers()[w].device->memory_stats().device_peak_bytes, m.worker_peak(w))
        << "worker " << w;
  }
  EXPECT_EQ(m.parameters, t.net().learnable_count() * 4);
  EXPECT_GT(m.activations, 0);
  EXPECT_GT(m.test_net, 0);
  if (std::string(k.sync) == "ps0") {  // worker 0 receives from 1 and 2, worker 2 from 3
    EXPECT_EQ(m.receive_bytes(0), 2 * m.gradients);
    EXPECT_EQ(m.receive_bytes(2), m.gradients);
    EXPECT_EQ(m.receive_bytes(1), 0);
  }
  if (std::string(k.sync) == "cgdp") EXPECT_EQ(m.pinned, (k.devices + 1) * m.gradients);
}

INSTANTIATE_TEST_SUITE_P(
    Runs, EstimateMatches,
    ::testing::Values(Case{"fashion_cnn", 2, "cgdp"}, Case{"fashion_cnn", 4, "ps0"},
                      Case{"resnet_small", 3, "cgdp"}, Case{"resnet_small", 2, "cgdp", "bf16"},
                      Case{"fashion_cnn", 3, "cgdp", "fp32", "factors"}),
    [](const auto& info) {
      return cat(info.param.model, "_", info.param.devices, "_", info.param.sync, "_",
                 info.param.precision, "_", info.param.fc_exchange);
    });

// 10^10 parameters (40 GB of weights) on a 10^5-wide input.
const char* kHugeNet = R"(name: "Huge"
layer { name: "data" type: "Input" top: "data" top: "label"
  input_param { shape { dim: 2 dim: 1 dim: 1 dim: 100000 } shape { dim: 2 } } }
layer { name: "fc" type: "InnerProduct" bottom: "data" top: "fc"
  inner_product_param { num_output: 100000 weight_filler { type: "gaussian" std: 0.01 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "fc" bottom: "label" top: "loss" }
)";

class HugeNet : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / cat("cgdp_memory_", ::getpid());
    fs::create_directories(dir_);
    path_ = (dir_ / "huge.prototxt").string();
    std::ofstream(path_) << kHugeNet;
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
  std::string path_;
};

TEST_F(HugeNet, IsMeasuredWithoutCommittingItsMemory) {
  const int64_t before = resident_bytes();
  const MemoryEstimate m = estimate_memory(load_model(path_), path_, 2, 2, 4, SyncKind::Cgdp);
  EXPECT_EQ(m.parameters, 40'000'400'000);  // weights and biases, 4 bytes each
  EXPECT_EQ(m.device_total(), 4 * (m.replica() + m.history) + m.test_net);
  EXPECT_EQ(m.fullest_gpu(2), 2 * (m.replica() + m.history) + m.test_net);
  EXPECT_LT(resident_bytes() - before, 64 << 20) << "measuring touched the net's memory";
}

// What a CPU layer keeps from forward for backward is device memory, counted as its scratch and
// never committed while measuring: AlexNet at batch 256 keeps its two LRNs' scales (297 and 191
// MB) and its three max poolings' argmax (31 MB: a byte per output).
TEST(LayerScratch, IsCountedAndMeasuredWithoutCommittingIt) {
  const int64_t before = resident_bytes();
  const MemoryEstimate m = estimate_memory(load_model(find_model_file("alexnet")), "alexnet", 256,
                                           1, 1, SyncKind::Local);
  const int64_t lrn = 256 * (96 * 55 * 55 + 256 * 27 * 27) * int64_t{sizeof(float)};
  const int64_t argmax = 256 * (96 * 27 * 27 + 256 * 13 * 13 + 256 * 6 * 6);
  EXPECT_GE(m.scratch, lrn + argmax);
  EXPECT_LT(resident_bytes() - before, 64 << 20) << "measuring touched the layers' memory";
  // Built as on CUDA, where the column kernels' LRN keeps no scale; a test net's keeps none on
  // either (forward only). The CUDA layers add what they allocate at their first pass: fc6-8's
  // bias columns of 256 ones, the loss's 256 labels, error record and normaliser; at test (batch
  // 1) the same, and Accuracy's label; and the solver its norm's partial sums.
  MemoryEstimate cuda = estimate_memory(load_model(find_model_file("alexnet")), "alexnet", 256, 1,
                                        1, SyncKind::Local, 1, nullptr, "", {}, DeviceKind::Cuda);
  add_cuda_scratch(cuda, DeviceKind::Cuda, 0, Precision::kFp32);
  const int64_t cuda_layers = 3 * 256 * 4 + (256 * 8 + 16 + 8);
  const int64_t cuda_test_layers = 3 * 1 * 4 + (8 + 16 + 8) + (8 + 16);
  EXPECT_EQ(cuda.scratch, m.scratch - lrn + cuda_layers);
  EXPECT_EQ(cuda.test_net, m.test_net + cuda_test_layers);
  EXPECT_EQ(cuda.solver_scratch, 129 * 8);
  EXPECT_EQ(cuda.worker_bytes(0) - cuda.cudnn_scratch - cuda.solver_scratch,
            m.worker_bytes(0) - lrn + cuda_layers + cuda_test_layers);
}

// A CUDA worker's convolutions run their ReLU's backward apart, a CPU worker's inside them;
// in a packed net that moves what the arena holds at each backward step (VGG-16's first block:
// 196 MiB less at batch 32 on CUDA). inspect and train measure a CUDA worker's nets as it builds
// them, not as a CPU worker would.
TEST(MemoryBudget, ACudaWorkersNetsAreMeasuredAsItBuildsThem) {
  const auto model = parse_model(R"(
    layer { name: "data" type: "Input" top: "data" top: "label"
            input_param { shape { dim: 4 dim: 3 dim: 16 dim: 16 } shape { dim: 4 } } }
    layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
            convolution_param { num_output: 16 kernel_size: 3 pad: 1 } }
    layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }
    layer { name: "conv2" type: "Convolution" bottom: "conv1" top: "conv2"
            convolution_param { num_output: 16 kernel_size: 3 pad: 1 } }
    layer { name: "relu2" type: "ReLU" bottom: "conv2" top: "conv2" }
    layer { name: "pool" type: "Pooling" bottom: "conv2" top: "pool"
            pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
    layer { name: "ip" type: "InnerProduct" bottom: "pool" top: "ip" inner_product_param { num_output: 3 } }
    layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
  )",
                                 "block.prototxt");
  const ScopedLayerPrecision bf16(Precision::kBf16);
  ActivationMemoryPlan planned;
  planned.memory = ActivationMemory::Planned;
  const auto arena_on = [&](DeviceKind kind) {
    MeasuringDevice device(kind);
    Net<float> net(model, Phase::Train, device, 0, 1, "block.prototxt", planned.memory);
    EXPECT_EQ(net.absorbed(2), kind == DeviceKind::Cpu);
    EXPECT_EQ(net.absorbed(4), kind == DeviceKind::Cpu);
    // A CUDA convolution in 16 bits runs the ReLU's forward as it widens its result, no backward.
    EXPECT_TRUE(net.forward_absorbed(2));
    EXPECT_TRUE(net.forward_absorbed(4));
    net.plan_activations(kNoArenaLimit, nullptr, planned.pack);
    return net.activation_plan().arena_bytes;
  };
  const int64_t cpu = arena_on(DeviceKind::Cpu), cuda = arena_on(DeviceKind::Cuda);
  ASSERT_NE(cpu, cuda);  // else the check below could not tell the two apart
  for (const DeviceKind kind : {DeviceKind::Cpu, DeviceKind::Cuda})
    EXPECT_EQ(estimate_memory(model, "block.prototxt", 0, 0, 1, SyncKind::Local, 1, nullptr, "",
                              planned, kind)
                  .arena,
              kind == DeviceKind::Cuda ? cuda : cpu);
}

// And on a GPU: the arena a CUDA worker plans is the one measured for it (fashion_cnn's ReLUs run
// apart from its convolutions there).
TEST(MemoryBudget, ACudaWorkersArenaIsTheOneMeasured) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU on this machine: CUDA test not run";
  TrainConfig c = small_run("fashion_cnn", 1, "local");
  c.device_kind = "cuda";
  c.precision = "bf16";
  c.cudnn_workspace_mb = 1;
  FILE* sink = std::fopen("/dev/null", "w");
  Trainer t(c, sink);
  std::fclose(sink);
  ASSERT_TRUE(t.net().activations_planned());
  const ScopedLayerPrecision bf16(Precision::kBf16);
  ActivationMemoryPlan planned;
  planned.memory = ActivationMemory::Planned;
  planned.pack = packing_of("auto", DeviceKind::Cuda);
  const MemoryEstimate m =
      estimate_memory(load_model(find_model_file("fashion_cnn")), "fashion_cnn", 4, 6, 1,
                      SyncKind::Local, 1, nullptr, "", planned, DeviceKind::Cuda);
  EXPECT_EQ(m.arena, t.net().activation_plan().arena_bytes);
}

// Every byte a CUDA worker allocates is in the estimate the trainer fits its budget with: with
// cuDNN's choices stored (no search), after training and testing each worker's peak is its
// estimate to the byte, with one worker and two (ps0: one of them does not update; cgdp: every
// weight dense, or fashion_cnn's two InnerProducts as sufficient factors, and either with the
// exchange in 16 bits), in fp32 and in bf16.
TEST(MemoryBudget, ACudaWorkersPeakIsItsEstimateToTheByte) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU on this machine: CUDA test not run";
  struct Run {
    const char* sync;
    const char* fc_exchange;
    const char* exchange_dtype;
  };
  const testing::TempDir dir;
  FILE* sink = std::fopen("/dev/null", "w");
  for (const Run& run : {Run{"local", "dense", "fp32"}, Run{"ps0", "dense", "fp32"},
                         Run{"cgdp", "dense", "fp32"}, Run{"cgdp", "dense", "bf16"},
                         Run{"cgdp", "factors", "fp32"}, Run{"cgdp", "factors", "fp16"}})
    for (const char* precision : {"fp32", "bf16"}) {
      SCOPED_TRACE(cat(run.sync, " ", run.fc_exchange, " ", run.exchange_dtype, " exchange, ",
                       precision, " layers"));
      const std::string sync = run.sync;
      TrainConfig c = small_run("fashion_cnn", sync == "local" ? 1 : 2, sync);
      c.device_kind = "cuda";
      c.precision = precision;
      c.fc_exchange = run.fc_exchange;
      c.exchange_dtype = run.exchange_dtype;
      c.iterations = 2;
      c.test_samples = 6;  // one test batch, at the end
      c.cudnn_algorithms_path = (dir / cat(sync, "_", precision, ".txt")).string();
      Trainer(c, sink).run();  // searches, and stores the choices
      Trainer t(c, sink);
      t.run();
      if (run.fc_exchange == std::string("factors"))
        EXPECT_GT(t.memory_estimate().exchange_factors, 0);
      for (const Worker& w : t.workers()) {
        const int64_t peak = w.device->memory_stats().device_peak_bytes;
        EXPECT_EQ(peak, t.memory_estimate().worker_peak(w.index)) << "worker " << w.index;
      }
    }
  std::fclose(sink);
}

// An LRN that the column kernels do not compute (WITHIN_CHANNEL, or a window above 15) keeps a
// scale on CUDA too, and a work buffer once its backward ran; the CPU half keeps both from the
// start, but across channels in a TEST net none.
TEST(LayerScratch, AnLrnKeepsWhatItsDevicesKernelsNeed) {
  const auto model = parse_model(R"(
    layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 2 dim: 3 dim: 4 dim: 4 } } }
    layer { name: "across" type: "LRN" bottom: "data" top: "a" }
    layer { name: "wide" type: "LRN" bottom: "a" top: "b" lrn_param { local_size: 17 } }
    layer { name: "within" type: "LRN" bottom: "a" top: "w" lrn_param { norm_region: WITHIN_CHANNEL } }
  )",
                                 "lrn.prototxt");
  MeasuringDevice device;
  Net<float> net(model, Phase::Train, device, 0, 1, "lrn.prototxt");
  Net<float> test(model, Phase::Test, device, 0, 1, "lrn.prototxt");
  const int64_t bytes = 2 * 3 * 4 * 4 * int64_t{sizeof(float)};
  const auto lrn = [](const Net<float>& in, const std::string& name) -> const LRNLayer<float>& {
    for (int i = 0; i < in.num_layers(); ++i)
      if (in.layer(i).name() == name) return dynamic_cast<const LRNLayer<float>&>(in.layer(i));
    throw std::runtime_error("no layer " + name);
  };
  const auto &across = lrn(net, "across"), &wide = lrn(net, "wide"), &within = lrn(net, "within");
  EXPECT_TRUE(across.cuda_runs_columns());
  EXPECT_FALSE(wide.cuda_runs_columns());
  EXPECT_FALSE(within.cuda_runs_columns());
  EXPECT_EQ(across.kept_bytes(DeviceKind::Cuda, true), 0);
  EXPECT_EQ(wide.kept_bytes(DeviceKind::Cuda, false), bytes);
  EXPECT_EQ(within.kept_bytes(DeviceKind::Cuda, true), 2 * bytes);
  EXPECT_EQ(across.kept_bytes(DeviceKind::Cpu, false), bytes);
  EXPECT_EQ(within.kept_bytes(DeviceKind::Cpu, false), 2 * bytes);
  EXPECT_EQ(lrn(test, "across").kept_bytes(DeviceKind::Cpu, false), 0);
  EXPECT_EQ(lrn(test, "within").kept_bytes(DeviceKind::Cpu, false), 2 * bytes);
}

TEST_F(HugeNet, IsRefusedBeforeAnyAllocationNamingTheLargestParts) {
  const std::string cmd = cat(testing::binary_dir(), "/cgdp train --model ", path_,
                              " --data synthetic:1,1,100000,10 --iterations 1 2>&1");
  const testing::CommandResult r = testing::run_command(cmd);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_EQ(r.output.rfind("cgdp: error: this run needs ", 0), 0u) << r.output;
  EXPECT_NE(r.output.find("parameters 37.3 GiB"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("to fit: a smaller model"), std::string::npos) << r.output;
}

// On CUDA each worker also holds cuDNN's scratch (up to --cudnn-workspace-mb) and, while a
// backward-filter search runs, a filter gradient as large as the largest convolution's weights:
// the estimate measures the latter and counts the scratch on every worker.
TEST(MemoryBudget, CudnnScratchIsCountedOnEveryWorker) {
  const proto::NetParameter model = load_model(find_model_file("fashion_cnn"));
  MemoryEstimate m = estimate_memory(model, "fashion_cnn", 4, 4, 2, SyncKind::Cgdp);
  EXPECT_EQ(m.largest_convolution_weights, 64 * 32 * 5 * 5 * 4);  // conv2's, in float
  const int64_t before[2] = {m.worker_bytes(0), m.worker_bytes(1)};
  m.cudnn_scratch = int64_t{1} << 30;
  for (int w = 0; w < 2; ++w) EXPECT_EQ(m.worker_bytes(w), before[w] + (int64_t{1} << 30));
  try {
    check_memory_fits(m, DeviceKind::Cuda, 2, m.fullest_gpu(2) - 1, "--device-memory-gb 1",
                      BudgetScope::Device);
    FAIL() << "a run one byte over its budget was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("cuDNN scratch 1.0 GiB"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("a lower --cudnn-workspace-mb"), std::string::npos)
        << e.what();
  }
}

// With cuDNN's choices stored for every convolution pass (train --cudnn-algorithms), no search
// runs: a CUDA worker holds only the scratch those algorithms need, not the cap. A pass missing,
// another GPU model, or other settings (the key holds them), and the cap counts again.
TEST(MemoryBudget, StoredCudnnChoicesCountOnlyTheScratchTheyNeed) {
  const proto::NetParameter model = load_model(find_model_file("fashion_cnn"));
  set_cuda_options({});
  const MemoryEstimate m = estimate_memory(model, "fashion_cnn", 4, 6, 1, SyncKind::Local);
  // Train: conv1 forward and weight gradient (it reads the data: no input gradient), conv2 all
  // three; test, batch 6: both forwards.
  ASSERT_EQ(m.cudnn_passes.size(), 7u);
  EXPECT_EQ(
      std::count_if(m.cudnn_passes.begin(), m.cudnn_passes.end(),
                    [](const ConvPassProblem& p) { return p.pass == ConvPass::BackwardData; }),
      1);
  // conv1's key as stored files hold it (element size, input, outputs, kernel, pad, stride,
  // dilation, group, TF32, deterministic, cap; in 16 bits the precision and channels last after
  // them): a change orphans every file.
  EXPECT_EQ(m.cudnn_passes[0].problem,
            (std::vector<int64_t>{4, 4, 1, 28, 28, 32, 5, 5, 2, 2, 1, 1, 1, 1, 1, 0, 1, 1 << 30}));
  // conv2's (32 channels in, 64 out): in bf16 and fp16 the precision and whether its operands go
  // channels last follow, so that no 16-bit choice is taken for another layout or precision.
  const auto conv2_forward_key = [&](Precision precision, bool fastest) {
    const ScopedLayerPrecision in(precision);
    const ScopedChannelBlocks layout(fastest);
    for (const ConvPassProblem& p :
         estimate_memory(model, "fashion_cnn", 4, 6, 1, SyncKind::Local).cudnn_passes)
      if (p.pass == ConvPass::Forward && p.problem[2] == 32) return p.problem;
    ADD_FAILURE() << "no forward pass of conv2";
    return std::vector<int64_t>{};
  };
  const std::vector<int64_t> fp32 = conv2_forward_key(Precision::kFp32, true);
  ASSERT_EQ(fp32.size(), 18u);
  EXPECT_EQ(conv2_forward_key(Precision::kFp32, false), fp32);
  const auto with = [&](Precision precision, bool last) {
    std::vector<int64_t> key = fp32;
    key.insert(key.end(), {static_cast<int64_t>(precision), int64_t{last}});
    return key;
  };
  EXPECT_EQ(conv2_forward_key(Precision::kBf16, true), with(Precision::kBf16, true));
  EXPECT_EQ(conv2_forward_key(Precision::kBf16, false), with(Precision::kBf16, false));
  EXPECT_EQ(conv2_forward_key(Precision::kFp16, true), with(Precision::kFp16, true));
  const auto table = [&](size_t passes) {
    auto choices = std::make_unique<ConvAlgorithmTable>();
    for (size_t k = 0; k < passes; ++k)
      choices->find_or_search(
          {"GPU A", static_cast<int>(m.cudnn_passes[k].pass), m.cudnn_passes[k].problem}, [&] {
            return ConvChoice{1, static_cast<int64_t>(k + 1) << 20, 0};
          });
    return choices;
  };
  const auto scratch = [&](const ConvAlgorithmTable& choices, const std::string& gpu) {
    MemoryEstimate e = m;
    add_cuda_scratch(e, DeviceKind::Cuda, 1024, Precision::kFp32, &choices, gpu);
    return std::pair{e.cudnn_scratch, e.cudnn_scratch_stored};
  };
  const auto all = table(7), fewer = table(6);
  const std::pair cap{(int64_t{1024} << 20) + 64 * 32 * 5 * 5 * 4, false};
  EXPECT_EQ(scratch(*all, "GPU A"), std::pair(int64_t{7} << 20, true));
  EXPECT_EQ(scratch(*all, ""), std::pair(int64_t{7} << 20, true));  // inspect: any GPU model
  EXPECT_EQ(scratch(*all, "GPU B"), cap);
  EXPECT_EQ(scratch(*fewer, "GPU A"), cap);
  // inspect reads a stored file, and keys it by its --tf32 as train does.
  const testing::TempDir dir;
  const fs::path file = dir / "cudnn.txt";
  write_file_atomically(file, all->to_text());
  const std::string inspect =
      cat(testing::binary_dir(), "/cgdp inspect --model fashion_cnn --memory --batch 4 ",
          "--test-batch 6 --json --device-kind cuda --cudnn-algorithms ", file.string(), " 2>&1");
  const testing::CommandResult stored = testing::run_command(inspect);
  ASSERT_EQ(stored.exit_code, 0) << stored.output;
  const nlohmann::json j = nlohmann::json::parse(stored.output);
  EXPECT_EQ(j["cudnn_scratch"], int64_t{7} << 20);
  EXPECT_EQ(j["cudnn_scratch_from_stored_choices"], true);
  const testing::CommandResult tf32 = testing::run_command(inspect + " --tf32");
  ASSERT_EQ(tf32.exit_code, 0) << tf32.output;
  EXPECT_EQ(nlohmann::json::parse(tf32.output)["cudnn_scratch"], cap.first);
}

// In bf16/fp16 on CUDA each worker's stream also holds the 16-bit copies of the largest
// multiplying layer call's operands, each from a 256-byte boundary: fashion_cnn's ip1 (3,136
// inputs, 256 outputs) at batch 4, whose backward narrows its output's gradient too. Worker 0's
// stream runs the test net, forward only, at its own batch: there ip1 narrows no output (at
// batch 6 it needs more than the train net's backward by what that leaves out), and at batch 100
// conv1's (1 -> 32 channels, 5 x 5, 28 x 28 out) are the largest.
TEST(MemoryBudget, SixteenBitOperandCopiesAreCountedOnEveryWorker) {
  EXPECT_EQ(half_operand_bytes(1, 0, 129), 256 + 0 + 512);
  const proto::NetParameter model = load_model(find_model_file("fashion_cnn"));
  MemoryEstimate m = estimate_memory(model, "fashion_cnn", 4, 6, 2, SyncKind::Cgdp);
  EXPECT_EQ(m.largest_half_operands, 2 * (4 * 3136 + 4 * 256 + 256 * 3136));  // all 256-aligned
  EXPECT_EQ(m.largest_test_half_operands, 2 * (6 * 3136 + 256 * 3136));
  const int64_t worker0 = m.worker_bytes(0), worker1 = m.worker_bytes(1);
  add_cuda_scratch(m, DeviceKind::Cuda, 0, Precision::kBf16, nullptr, "");
  EXPECT_EQ(m.worker_bytes(1) - worker1 - m.cudnn_scratch - m.solver_scratch,
            m.largest_half_operands);
  EXPECT_EQ(m.worker_bytes(0) - worker0 - m.cudnn_scratch - m.solver_scratch,
            m.largest_test_half_operands);
  const MemoryEstimate larger_test =
      estimate_memory(model, "fashion_cnn", 4, 100, 2, SyncKind::Cgdp);
  EXPECT_EQ(larger_test.largest_test_half_operands,
            half_operand_bytes(100 * 28 * 28, 100 * 32 * 28 * 28, 32 * 5 * 5));
}

TEST(MemoryBudget, TheBudgetFlagIsTheLimitAndTheLineNamesIt) {
  TrainConfig c = small_run("fashion_cnn", 2, "cgdp");
  // 3 MiB a device: below what fashion_cnn reaches with its momentum, some activations and its
  // inner products' weights waiting on the host (5.6 MiB: the biases, the stages they pass
  // through).
  c.device_memory_gb = 0.003;
  try {
    Trainer t(c, stderr);
    FAIL() << "a run past --device-memory-gb was accepted";
  } catch (const UsageError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("--device-memory-gb 0.003 is 3.1 MiB"), std::string::npos) << what;
    EXPECT_NE(what.find("on worker 0's device (cpu:0), with "), std::string::npos) << what;
  }
  c.device_memory_gb = 1;
  EXPECT_NO_THROW(Trainer(c, std::fopen("/dev/null", "w")));
}

// Issue 18's command, ResNet-152 at batch 16: its test net is built at the train batch (at the
// old default of 100 it alone was 79 GiB), so the run fits 80 GB; a budget below the total
// `inspect --memory` gives is refused at start naming that total (with --offload off; auto would
// plan the activations to fit).
TEST(MemoryBudget, TrainRefusesWhatInspectReports) {
  const std::string bin = cat(testing::binary_dir(), "/cgdp ");
  const testing::CommandResult inspect =
      testing::run_command(bin + "inspect --model resnet152 --memory --batch 16 --json 2>&1");
  ASSERT_EQ(inspect.exit_code, 0) << inspect.output;
  const size_t at = inspect.output.find("\"worker_peak_bytes\": [");
  ASSERT_NE(at, std::string::npos) << inspect.output;
  const int64_t total =
      std::stoll(inspect.output.substr(inspect.output.find_first_of("0123456789", at)));
  EXPECT_NE(inspect.output.find("\"test_batch\": 16"), std::string::npos) << inspect.output;
  EXPECT_LT(total, int64_t{80} << 30);
  const double budget_gb = static_cast<double>(total) / (1 << 30) - 0.5;
  const testing::CommandResult train = testing::run_command(cat(
      bin, "train --model resnet152 --data synthetic --batch 16 --offload off --device-memory-gb ",
      budget_gb, " 2>&1"));
  EXPECT_EQ(train.exit_code, 1) << train.output;
  EXPECT_NE(train.output.find(cat("needs ", format_bytes(total), " on worker 0's device")),
            std::string::npos)
      << train.output;
  EXPECT_NE(train.output.find("(batch 16, test batch 16)"), std::string::npos) << train.output;
  EXPECT_NE(train.output.find("lower --batch"), std::string::npos) << train.output;
}

// `inspect --memory --device-kind cuda` counts what train counts on a CUDA worker: cuDNN's
// scratch (the cap plus conv2's weights), in bf16 the 16-bit operand copies, the solver's norm
// scratch and the CUDA layers' own buffers; a CPU worker holds none of them.
TEST(MemoryBudget, InspectCountsWhatACudaWorkerHoldsBesidesItsNets) {
  const std::string inspect =
      cat(testing::binary_dir(), "/cgdp inspect --model fashion_cnn --memory --batch 4 --json ");
  auto field = [](const std::string& json, const std::string& name) {
    const size_t at = json.find(cat("\"", name, "\": "));
    return at == std::string::npos ? int64_t{-1} : std::stoll(json.substr(at + name.size() + 4));
  };
  const testing::CommandResult cuda = testing::run_command(
      inspect +
      "--device-kind cuda --precision bf16 --cudnn-workspace-mb 8 --pack-activations on 2>&1");
  ASSERT_EQ(cuda.exit_code, 0) << cuda.output;
  EXPECT_EQ(field(cuda.output, "cudnn_scratch"), (8 << 20) + 64 * 32 * 5 * 5 * 4) << cuda.output;
  EXPECT_EQ(field(cuda.output, "half_operands"), 2 * (4 * 3136 + 4 * 256 + 256 * 3136))
      << cuda.output;
  const testing::CommandResult cpu =
      testing::run_command(inspect + "--precision bf16 --pack-activations on 2>&1");
  ASSERT_EQ(cpu.exit_code, 0) << cpu.output;
  EXPECT_EQ(field(cpu.output, "cudnn_scratch"), 0) << cpu.output;
  EXPECT_EQ(field(cpu.output, "half_operands"), 0) << cpu.output;
  // What CUDA layers allocate at their first pass: ip1's and ip2's bias columns of 4 ones, the
  // loss's 4 decoded labels, its error record and normaliser; at test, Accuracy's labels too.
  const int64_t layers = 2 * 4 * 4 + (4 * 8 + 16 + 8);
  EXPECT_EQ(field(cuda.output, "layer_scratch") - field(cpu.output, "layer_scratch"), layers);
  EXPECT_EQ(field(cuda.output, "test_net") - field(cpu.output, "test_net"), layers + 4 * 8 + 16);
  EXPECT_EQ(field(cuda.output, "solver_scratch"), 129 * 8);  // the norm's partial sums
  EXPECT_EQ(field(cpu.output, "solver_scratch"), 0);
  EXPECT_EQ(field(cuda.output, "total") - field(cpu.output, "total"),
            field(cuda.output, "cudnn_scratch") + field(cuda.output, "half_operands") +
                field(cuda.output, "solver_scratch") + layers + layers + 4 * 8 + 16);
}

// `inspect --memory` counts what cgdp's exchange keeps on each worker, as train does: on CUDA,
// fashion_cnn's two InnerProducts go as factors by Poseidon's rule (4 samples' rows of ip1,
// 3136 in and 256 out, and of ip2, 256 in and 10 out, staged; both workers' rows of ip1 received);
// with a 16-bit exchange also the narrowed gradient and sums, and the rows narrowed both ways.
TEST(MemoryBudget, InspectCountsTheExchangesBuffers) {
  const std::string inspect = cat(
      testing::binary_dir(), "/cgdp inspect --model fashion_cnn --memory --batch 4 -n 2 --json ");
  auto field = [](const std::string& json, const std::string& name) {
    const size_t at = json.find(cat("\"", name, "\": "));
    return at == std::string::npos ? int64_t{-1} : std::stoll(json.substr(at + name.size() + 4));
  };
  const int64_t ip1 = 4 * (3136 + 256), ip2 = 4 * (256 + 10);
  const testing::CommandResult cuda = testing::run_command(inspect + "--device-kind cuda 2>&1");
  ASSERT_EQ(cuda.exit_code, 0) << cuda.output;
  EXPECT_EQ(field(cuda.output, "exchange_factors"), 4 * (ip1 + ip2) + 4 * 2 * ip1) << cuda.output;
  EXPECT_EQ(field(cuda.output, "exchange_narrow"), 0) << cuda.output;
  const testing::CommandResult bf16 =
      testing::run_command(inspect + "--device-kind cuda --exchange-dtype bf16 2>&1");
  ASSERT_EQ(bf16.exit_code, 0) << bf16.output;
  const int64_t params = field(bf16.output, "parameters") / 4;
  EXPECT_EQ(field(bf16.output, "exchange_narrow"), 2 * 2 * params + 2 * 4 * 4) << bf16.output;
  EXPECT_EQ(field(bf16.output, "exchange_factors"),
            field(cuda.output, "exchange_factors") + 2 * 2 * ip1 + 2 * ip1 + 2 * (2 + 2) * 4)
      << bf16.output;
  for (const char* flags : {"--device-kind cuda --fc-exchange dense", "--device-kind cpu"}) {
    const testing::CommandResult dense = testing::run_command(cat(inspect, flags, " 2>&1"));
    ASSERT_EQ(dense.exit_code, 0) << dense.output;
    EXPECT_EQ(field(dense.output, "exchange_factors"), 0) << flags << "\n" << dense.output;
  }
}

// --pack-activations: auto rounds BatchNorm's kept values on a CUDA worker, which packs from the
// start, and packs only exactly on a CPU worker, which packs only to fit its budget: there a run
// that needs the budget trains the bits of one that does not.
TEST(MemoryBudget, PackModesSayWhatWaitsIn16BitsAndFromWhen) {
  for (const DeviceKind kind : {DeviceKind::Cpu, DeviceKind::Cuda}) {
    SCOPED_TRACE(kind == DeviceKind::Cpu ? "cpu" : "cuda");
    EXPECT_EQ(packing_of("on", kind), Packing::Rounding);
    EXPECT_EQ(packing_of("exact", kind), Packing::Exact);
    EXPECT_EQ(packing_of("off", kind), Packing::None);
    EXPECT_TRUE(packs_from_the_start("on", kind));
    EXPECT_TRUE(packs_from_the_start("exact", kind));
    EXPECT_FALSE(packs_from_the_start("off", kind));
  }
  EXPECT_EQ(packing_of("auto", DeviceKind::Cuda), Packing::Rounding);
  EXPECT_EQ(packing_of("auto", DeviceKind::Cpu), Packing::Exact);
  EXPECT_TRUE(packs_from_the_start("auto", DeviceKind::Cuda));
  EXPECT_FALSE(packs_from_the_start("auto", DeviceKind::Cpu));
  try {
    packing_of("rounded", DeviceKind::Cpu);
    ADD_FAILURE() << "an unknown mode was taken";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "--pack-activations must be auto, on, exact or off, not 'rounded'");
  }
}

// In bf16 `inspect --memory` plans the activations and counts the packed ones in 16 bits, as train
// does: by default on a CUDA worker, not on a CPU one; --pack-activations on and off choose.
TEST(MemoryBudget, InspectCountsPackedActivations) {
  const std::string inspect =
      cat(testing::binary_dir(),
          "/cgdp inspect --model fashion_cnn --memory --batch 8 --precision bf16 ");
  const auto run = [&](const std::string& flags) {
    const testing::CommandResult r = testing::run_command(inspect + flags + " 2>&1");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return r.output;
  };
  const std::string text = run("--pack-activations on");
  const nlohmann::json on = nlohmann::json::parse(run("--json --pack-activations on")),
                       cpu = nlohmann::json::parse(run("--json")),
                       cuda = nlohmann::json::parse(run("--json --device-kind cuda")),
                       cuda_off = nlohmann::json::parse(
                           run("--json --device-kind cuda --pack-activations off"));
  EXPECT_EQ(on.at("offload").at("packed").get<int>(), 6) << on;
  EXPECT_TRUE(cpu.at("offload").is_null()) << cpu;
  EXPECT_LT(on.at("total").get<int64_t>(), cpu.at("total").get<int64_t>());
  EXPECT_EQ(cuda.at("offload").at("packed").get<int>(), 6) << cuda;
  EXPECT_TRUE(cuda_off.at("offload").is_null()) << cuda_off;
  EXPECT_NE(text.find("6 of 11 wait in 16 bits between forward and backward"), std::string::npos)
      << text;
  // The data, conv1, pool1 and conv2: only convolutions and ReLU masks read them back.
  EXPECT_EQ(on.at("offload").at("read_packed").get<int>(), 4) << on;
  EXPECT_NE(text.find("; 4 of them read in 16 bits by every reader, never widened back"),
            std::string::npos)
      << text;
  // Where the arena is fullest, and what holds it there: pool1's backward, writing conv1's
  // gradient while conv1's 16-bit copy waits for its absorbed ReLU's backward to read the mask
  // from it, most bytes first.
  const nlohmann::json& fullest = on.at("offload").at("fullest_step");
  EXPECT_EQ(fullest.at("layer"), "pool1") << fullest;
  EXPECT_EQ(fullest.at("pass"), "backward") << fullest;
  int64_t held = 0, before = std::numeric_limits<int64_t>::max();
  for (const nlohmann::json& h : fullest.at("holders")) {
    held += h.at("bytes").get<int64_t>();
    EXPECT_LE(h.at("bytes").get<int64_t>(), before) << fullest;
    before = h.at("bytes").get<int64_t>();
  }
  EXPECT_EQ(fullest.at("holders").at(0).at("name"), "conv1 (gradient)") << fullest;
  EXPECT_EQ(fullest.at("holders").at(1).at("name"), "conv1 (16 bits)") << fullest;
  EXPECT_LE(held, fullest.at("bytes").get<int64_t>());
  EXPECT_LE(fullest.at("bytes").get<int64_t>(), on.at("offload").at("arena").get<int64_t>());
  EXPECT_NE(text.find("the arena is fullest at pool1's backward ("), std::string::npos) << text;
}

// AlexNet's LRNs write their outputs over their inputs where those wait for backward only in bf16
// (rounding packs, the CUDA default): `inspect --memory` says so; exact packs keep them apart.
TEST(MemoryBudget, InspectCountsTheInputsLrnsWriteOver) {
  const std::string inspect = cat(testing::binary_dir(),
                                  "/cgdp inspect --model alexnet --memory --batch 2 --precision "
                                  "bf16 --device-kind cuda ");
  const auto run = [&](const std::string& flags) {
    const testing::CommandResult r = testing::run_command(inspect + flags + " 2>&1");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return r.output;
  };
  const nlohmann::json on = nlohmann::json::parse(run("--json")),
                       exact = nlohmann::json::parse(run("--json --pack-activations exact"));
  EXPECT_EQ(on.at("offload").at("written_over").get<int>(), 2) << on;
  EXPECT_EQ(exact.at("offload").at("written_over").get<int>(), 0) << exact;
  EXPECT_LT(on.at("offload").at("arena").get<int64_t>(),
            exact.at("offload").at("arena").get<int64_t>());
  EXPECT_NE(run("").find("; 2 of those written over by the layer after them;"), std::string::npos);
}

// `inspect --memory --solver-type` counts the solver's histories as train does: Adam keeps two
// per parameter, SGD one; a type train does not know is refused naming the flag.
TEST(MemoryBudget, InspectCountsTheSolversHistories) {
  const std::string inspect =
      cat(testing::binary_dir(), "/cgdp inspect --model fashion_cnn --memory --batch 4 --json ");
  const auto momentum = [&](const std::string& type) {
    const testing::CommandResult r =
        testing::run_command(inspect + "--solver-type " + type + " 2>&1");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    const nlohmann::json m = nlohmann::json::parse(r.output);
    return std::pair{m.at("momentum").get<int64_t>(), m.at("parameters").get<int64_t>()};
  };
  const auto [sgd, parameters] = momentum("SGD");
  EXPECT_EQ(sgd, parameters);
  EXPECT_EQ(momentum("Adam").first, 2 * parameters);
  const testing::CommandResult bad = testing::run_command(inspect + "--solver-type Lion 2>&1");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("--solver-type: unknown solver type \"Lion\""), std::string::npos)
      << bad.output;
}

TEST(MemoryBudget, BytesReadAsPeopleWriteThem) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
  EXPECT_EQ(format_bytes(int64_t{3} << 30), "3.0 GiB");
}

}  // namespace
}  // namespace cgdp
