// InnerProduct's forward and backward on the CPU backend for the paper nets' large weights, three
// ways side by side: the weight whole (slices larger than it), in the default 64 MiB slices
// (weight_slices.hpp: what every run does, so that a streamed run makes the same GEMM calls), and
// streamed from host memory through the device stage in those slices (issue 35's offload); in
// fp32 (OpenBLAS), in fp16 (rounded operands on the fp32 kernels) and, on a CPU with bf16
// kernels, in bf16 (oneDNN's matmuls).
//   build/bench/weight_slices_bench [--benchmark_filter=fc6]
#include <benchmark/benchmark.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cgdp/device/cpu_device.hpp"
#include "cgdp/device/layer_precision.hpp"
#include "cgdp/layers/weight_slices.hpp"
#include "cgdp/net/net.hpp"

namespace cgdp {
namespace {

struct Shape {
  const char* name;
  int64_t batch, inputs, outputs;
};

// AlexNet's fc6 (144 MiB: 3 slices) at the bench batch, VGG-16's fc6 (392 MiB: 7) at a batch
// that offloads and at the bench's, and fc7 (64 MiB: whole either way).
const Shape kShapes[] = {{"alexnet_fc6_b32", 32, 9216, 4096},
                         {"vgg16_fc6_b4", 4, 25088, 4096},
                         {"vgg16_fc6_b32", 32, 25088, 4096},
                         {"fc7_b32", 32, 4096, 4096}};

enum class Mode { Whole, Sliced, Streamed };

// Input -> InnerProduct "ip" -> nothing: the bench drives the layer and fills its top gradient.
proto::NetParameter one_layer(const Shape& s) {
  proto::NetParameter net;
  net.set_name(s.name);
  proto::LayerParameter* input = net.add_layer();
  input->set_name("data");
  input->set_type("Input");
  input->add_top("data");
  proto::BlobShape* shape = input->mutable_input_param()->add_shape();
  shape->add_dim(s.batch);
  shape->add_dim(s.inputs);
  proto::LayerParameter* ip = net.add_layer();
  ip->set_name("ip");
  ip->set_type("InnerProduct");
  ip->add_bottom("data");
  ip->add_top("ip");
  ip->mutable_inner_product_param()->set_num_output(static_cast<uint32_t>(s.outputs));
  ip->mutable_inner_product_param()->mutable_weight_filler()->set_type("gaussian");
  net.set_force_backward(true);
  return net;
}

void fill(Blob<float>& blob, bool diff) {
  std::mt19937 rng(1);
  std::normal_distribution<float> dist;
  float* x = diff ? blob.mutable_diff() : blob.mutable_data();
  for (int64_t i = 0; i < blob.count(); ++i) x[i] = dist(rng);
}

void run(benchmark::State& state, const Shape& s, Mode mode, bool backward, Precision precision) {
  const ScopedLayerPrecision layers_in(precision);
  const ScopedWeightSliceBytes slices(mode == Mode::Whole ? int64_t{1} << 40
                                                          : kDefaultWeightSliceBytes);
  const std::vector<std::string> streamed =
      mode == Mode::Streamed ? std::vector<std::string>{"ip"} : std::vector<std::string>{};
  Net<float> net(one_layer(s), Phase::Train, default_cpu_device(), 0, 1, s.name,
                 ActivationMemory::Owned, nullptr, streamed);
  const RunContext ctx{};
  fill(net.input_data(), false);
  net.forward_layer(1, ctx);
  fill(*net.tops(1)[0], true);
  for (auto _ : state) {
    if (backward)
      net.backward_layer(1, ctx);
    else
      net.forward_layer(1, ctx);
  }
}

void register_all() {
  const std::pair<Mode, const char*> modes[] = {
      {Mode::Whole, "whole"}, {Mode::Sliced, "sliced"}, {Mode::Streamed, "streamed"}};
  std::vector<Precision> precisions{Precision::kFp32, Precision::kFp16};
  if (cpu_has_bf16()) precisions.push_back(Precision::kBf16);
  for (Precision precision : precisions)
    for (const Shape& s : kShapes)
      for (bool backward : {false, true})
        for (const auto& [mode, mode_name] : modes)
          benchmark::RegisterBenchmark((std::string(s.name) + "/" + to_string(precision) +
                                        (backward ? "/backward/" : "/forward/") + mode_name)
                                           .c_str(),
                                       [s, mode, backward, precision](benchmark::State& state) {
                                         run(state, s, mode, backward, precision);
                                       })
              ->Unit(benchmark::kMillisecond)
              ->UseRealTime();
}

}  // namespace
}  // namespace cgdp

int main(int argc, char** argv) {
  cgdp::register_all();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
