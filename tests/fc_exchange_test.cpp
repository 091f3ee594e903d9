// --fc-exchange factors against dense (layers/sufficient_factors.hpp): the same training to fp32
// rounding, every worker holding the same bits, with micro-batches too; the start line says which
// weights went as factors. Chunks in pieces (--chunk-piece-kb) give whole chunks' bits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "cgdp/device/devices.hpp"
#include "cgdp/train/trainer.hpp"
#include "support/temp_dir.hpp"

namespace cgdp {
namespace {

// Conv, LRN and pooling, then three fully-connected layers with dropout: AlexNet's shape, small.
// Data: --data synthetic:3,24,24,10.
const char* kSmallAlexNet = R"(name: "SmallAlexNet"
layer { name: "data" type: "Input" top: "data" top: "label"
  input_param { shape { dim: 8 dim: 3 dim: 24 dim: 24 } shape { dim: 8 } } }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
  convolution_param { num_output: 8 kernel_size: 5 stride: 2 weight_filler { type: "xavier" } } }
layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }
layer { name: "norm1" type: "LRN" bottom: "conv1" top: "norm1" lrn_param { local_size: 3 } }
layer { name: "pool1" type: "Pooling" bottom: "norm1" top: "pool1"
  pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "fc6" type: "InnerProduct" bottom: "pool1" top: "fc6"
  inner_product_param { num_output: 48 weight_filler { type: "xavier" } } }
layer { name: "relu6" type: "ReLU" bottom: "fc6" top: "fc6" }
layer { name: "drop6" type: "Dropout" bottom: "fc6" top: "fc6" dropout_param { dropout_ratio: 0.5 } }
layer { name: "fc7" type: "InnerProduct" bottom: "fc6" top: "fc7"
  inner_product_param { num_output: 32 weight_filler { type: "xavier" } } }
layer { name: "relu7" type: "ReLU" bottom: "fc7" top: "fc7" }
layer { name: "fc8" type: "InnerProduct" bottom: "fc7" top: "fc8"
  inner_product_param { num_output: 10 weight_filler { type: "xavier" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "fc8" bottom: "label" top: "loss" }
)";

TrainConfig base_config(const std::string& model, const std::string& data, int64_t batch) {
  TrainConfig c;
  c.model = model;
  c.data = data;
  c.batch = batch;
  c.devices = 2;
  c.sync = "cgdp";
  c.chunk = "layer";
  c.iterations = 20;
  c.test_interval = -1;
  c.test_samples = 8;
  c.test_batch = 8;
  c.solver.set_base_lr(0.01f);
  c.solver.set_momentum(0.9f);
  c.plain_output = true;
  return c;
}

struct Trained {
  std::vector<std::vector<float>> workers;  // every worker's parameters
  std::string log;                          // what the run printed
};

Trained train(const TrainConfig& c, const std::string& fc_exchange) {
  TrainConfig with = c;
  with.fc_exchange = fc_exchange;
  testing::TempDir dir;
  const std::string log_path = (dir.path() / "log").string();
  FILE* log = std::fopen(log_path.c_str(), "w");
  Trained out;
  {
    Trainer t(with, log);
    t.run();
    for (int w = 0; w < t.num_workers(); ++w) {
      Net<float>& net = t.worker_net(w);
      out.workers.emplace_back(net.learnable_count());
      net.device().copy(out.workers.back().data(), net.flat_data().data(),
                        out.workers.back().size() * sizeof(float));
    }
  }
  std::fclose(log);
  std::ifstream in(log_path);
  out.log.assign(std::istreambuf_iterator<char>(in), {});
  return out;
}

// ||a - b|| / ||b||.
double relative_distance(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    diff += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    norm += double(b[i]) * b[i];
  }
  return std::sqrt(diff / norm);
}

void expect_factors_match_dense(const TrainConfig& c, const std::string& factored_line) {
  const Trained dense = train(c, "dense");
  const Trained factors = train(c, "factors");
  EXPECT_NE(factors.log.find(factored_line), std::string::npos) << factors.log;
  EXPECT_NE(dense.log.find("none as factors, --fc-exchange dense"), std::string::npos) << dense.log;
  const double distance = relative_distance(factors.workers[0], dense.workers[0]);
  EXPECT_LE(distance, 1e-5);
  EXPECT_GT(distance, 0) << "identical bits: did any weight travel as factors?";
  for (size_t w = 1; w < factors.workers.size(); ++w)
    EXPECT_EQ(factors.workers[w], factors.workers[0]) << "worker " << w << " differs";
}

TEST(FcExchange, FactorsTrainFashionCnnAsDenseDoesToFp32Rounding) {
  expect_factors_match_dense(
      base_config("fashion_cnn", "synthetic", 16),
      "fully-connected exchange: ip2, ip1 as factors, --fc-exchange factors");
}

// In bf16 the factors are the rounded rows the layer's bf16 multiplies read (oneDNN's matmuls on
// a CPU with AVX512_BF16): rebuilt in fp32, they give dense's gradient to fp32 rounding.
TEST(FcExchange, FactorsInBf16TrainAsDenseDoes) {
  TrainConfig c = base_config("fashion_cnn", "synthetic", 16);
  c.precision = "bf16";
  c.iterations = 10;
  expect_factors_match_dense(c, "fully-connected exchange: ip2, ip1 as factors");
}

// Three workers, two micro-batches each (their factors add up), and dropout.
TEST(FcExchange, FactorsTrainASmallAlexNetWithMicroBatchesAsDenseDoes) {
  testing::TempDir dir;
  const std::string model = (dir.path() / "small_alexnet.prototxt").string();
  std::ofstream(model) << kSmallAlexNet;
  TrainConfig c = base_config(model, "synthetic:3,24,24,10", 8);
  c.devices = 3;
  c.accumulate = 2;
  c.chunk = "2";
  expect_factors_match_dense(c, "fully-connected exchange: fc8, fc7, fc6 as factors");
}

// Two workers sharing the GPU: staging on the compute stream, rebuild on the H2D stream (cuBLAS).
// Three iterations: on an H200 two dense runs of 20 iterations in separate processes already
// differed by 1.3e-5 (GEMM convolutions; 2.9e-4 with cuDNN's searched ones), while dense against
// factors after 3 iterations differed by 7e-8.
TEST(FcExchange, FactorsOnCudaTrainAsDenseDoes) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU on this machine: CUDA test not run";
  TrainConfig c = base_config("fashion_cnn", "synthetic", 16);
  c.device_kind = "cuda";
  c.gemm_convolutions = true;
  c.iterations = 3;
  expect_factors_match_dense(c, "fully-connected exchange: ip2, ip1 as factors");
}

// --exchange-dtype bf16 and fp16: one iteration's update is fp32's with each summed gradient
// rounded once, to 8 or 11 bits (fc weights as factors, narrowed too); every worker ends with the
// same bits; the run says what its chunks travel as.
void expect_sixteen_bit_updates_rounded_once(TrainConfig c) {
  c.iterations = 1;
  std::vector<float> initial;
  {
    FILE* sink = std::fopen("/dev/null", "w");
    Trainer t(c, sink);  // built, not run: the parameters every run starts from
    Net<float>& net = t.worker_net(0);
    initial.resize(net.learnable_count());
    net.device().copy(initial.data(), net.flat_data().data(), initial.size() * sizeof(float));
    std::fclose(sink);
  }
  const auto step = [&](const Trained& run) {
    std::vector<float> delta(initial.size());
    for (size_t i = 0; i < delta.size(); ++i) delta[i] = run.workers[0][i] - initial[i];
    return delta;
  };
  const std::vector<float> fp32 = step(train(c, "dense"));
  for (const auto& [dtype, bound] : {std::pair{"bf16", 0x1p-8}, std::pair{"fp16", 0x1p-10}}) {
    SCOPED_TRACE(dtype);
    TrainConfig narrow = c;
    narrow.exchange_dtype = dtype;
    const Trained once = train(narrow, "factors");
    EXPECT_NE(once.log.find(cat("summed chunks travel as ", dtype)), std::string::npos) << once.log;
    const double error = relative_distance(step(once), fp32);
    EXPECT_LE(error, bound);
    EXPECT_GT(error, 0);
    narrow.iterations = 5;
    const Trained five = train(narrow, "factors");
    for (size_t w = 1; w < five.workers.size(); ++w)
      EXPECT_EQ(five.workers[w], five.workers[0]) << "worker " << w << " differs";
  }
}

TEST(ExchangeDtype, SixteenBitExchangeRoundsEachUpdateOnceAndKeepsWorkersEqual) {
  TrainConfig c = base_config("fashion_cnn", "synthetic", 16);
  c.devices = 3;
  expect_sixteen_bit_updates_rounded_once(c);
}

// The same on the GPU: kernels/exchange_codec.cu narrows on the D2H stream, widens on the H2D.
TEST(ExchangeDtype, SixteenBitExchangeOnCudaRoundsEachUpdateOnce) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU on this machine: CUDA test not run";
  TrainConfig c = base_config("fashion_cnn", "synthetic", 16);
  c.device_kind = "cuda";
  c.gemm_convolutions = true;
  c.devices = 3;
  expect_sixteen_bit_updates_rounded_once(c);
}

// --chunk-piece-kb: chunks copied, summed and sent back in pieces give the whole chunks' bits in
// each (dtype, fully-connected exchange), with factors beside them on a lane of their own, and
// the start line says so. 1 KiB cuts fashion_cnn's chunks into up to 400 pieces, the last of each
// part shorter.
void expect_pieces_give_whole_chunks_bits(
    TrainConfig c, const std::vector<std::pair<const char*, const char*>>& dtype_and_fc) {
  c.devices = 3;
  c.iterations = 3;
  c.chunk = "2";
  c.host_threads = 2;
  for (const auto& [dtype, fc] : dtype_and_fc) {
    SCOPED_TRACE(cat(dtype, ", ", fc));
    c.exchange_dtype = dtype;
    c.sum_lanes = fc == std::string("dense") ? 1 : 2;
    c.chunk_piece_kb = 0;
    const Trained whole = train(c, fc);
    c.chunk_piece_kb = 1;
    const Trained pieces = train(c, fc);
    EXPECT_NE(pieces.log.find("chunks in 1 KiB pieces"), std::string::npos) << pieces.log;
    for (size_t w = 0; w < pieces.workers.size(); ++w)
      EXPECT_EQ(pieces.workers[w], whole.workers[w]) << "worker " << w;
  }
}

TEST(ChunkPieces, PiecesTrainToTheBitsOfWholeChunks) {
  expect_pieces_give_whole_chunks_bits(base_config("fashion_cnn", "synthetic", 16),
                                       {{"fp32", "dense"},
                                        {"fp32", "factors"},
                                        {"bf16", "dense"},
                                        {"bf16", "factors"},
                                        {"fp16", "dense"},
                                        {"fp16", "factors"}});
}

// On a GPU each piece's D2H copy records an event that the host sum waits for before it reads the
// piece: the events pieces add beside whole chunks'.
TEST(ChunkPiecesOnCuda, PiecesTrainToTheBitsOfWholeChunks) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU on this machine: CUDA test not run";
  TrainConfig c = base_config("fashion_cnn", "synthetic", 16);
  c.device_kind = "cuda";
  c.gemm_convolutions = true;
  expect_pieces_give_whole_chunks_bits(c, {{"fp32", "dense"}, {"bf16", "factors"}});
}

// Without a profile, auto keeps CPU workers dense: their copies are memcpys, and the rebuild's
// GEMM would take the cores the layers compute on.
TEST(FcExchange, AutoWithoutAProfileKeepsCpuWorkersDense) {
  TrainConfig c = base_config("fashion_cnn", "synthetic", 16);
  c.iterations = 1;
  EXPECT_NE(train(c, "auto").log.find("none as factors, dense on CPU devices without a profile"),
            std::string::npos);
}

}  // namespace
}  // namespace cgdp
