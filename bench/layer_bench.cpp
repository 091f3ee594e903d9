// Each layer's forward and backward on its own, on the CPU backend: where an iteration's time
// goes, without streams, the data loader or other workers around it. The model and batch come
// from the environment: CGDP_BENCH_MODEL (default fashion_cnn), CGDP_BENCH_BATCH (default: the
// model's own). Input and labels are fixed random values; label 0 is valid for any class count.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <memory>
#include <random>
#include <string>

#include "cgdp/device/cpu_device.hpp"
#include "cgdp/net/model_file.hpp"
#include "cgdp/net/net.hpp"

namespace cgdp {
namespace {

std::string env_or(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value && *value ? value : fallback;
}

std::unique_ptr<Net<float>> make_net() {
  const std::string model = env_or("CGDP_BENCH_MODEL", "fashion_cnn");
  const int64_t batch = std::stoll(env_or("CGDP_BENCH_BATCH", "0"));
  auto net = std::make_unique<Net<float>>(load_model(find_model_file(model)), Phase::Train,
                                          default_cpu_device(), batch, 1, model);
  Blob<float>& data = net->input_data();
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(0, 1);
  float* x = data.mutable_data();
  for (int64_t i = 0; i < data.count(); ++i) x[i] = dist(rng);
  if (Blob<float>* label = net->input_label()) {
    float* y = label->mutable_data();
    for (int64_t i = 0; i < label->count(); ++i) y[i] = 0;
  }
  return net;
}

// One net for every case: building AlexNet per case would take longer than timing it.
Net<float>& shared_net() {
  static const std::unique_ptr<Net<float>> net = make_net();
  return *net;
}

const RunContext kContext{};  // no stream: layers run on the calling thread

void layer_forward(benchmark::State& state, int layer) {
  Net<float>& net = shared_net();
  net.forward(kContext);  // every bottom holds what a real pass leaves there
  for (auto _ : state) net.forward_layer(layer, kContext);
}

// Times layer i's backward with its top gradient as a real backward pass from the loss leaves it.
void layer_backward(benchmark::State& state, int layer) {
  Net<float>& net = shared_net();
  net.forward(kContext);
  for (int i = net.num_layers() - 1; i > layer; --i)
    if (net.needs_backward(i)) net.backward_layer(i, kContext);
  for (auto _ : state) net.backward_layer(layer, kContext);
}

void register_all() {
  Net<float>& net = shared_net();
  for (int i = 0; i < net.num_layers(); ++i) {
    const std::string name = net.layer(i).name();
    benchmark::RegisterBenchmark((name + "/forward").c_str(), layer_forward, i)
        ->Unit(benchmark::kMicrosecond)
        ->UseRealTime();
    if (net.needs_backward(i))
      benchmark::RegisterBenchmark((name + "/backward").c_str(), layer_backward, i)
          ->Unit(benchmark::kMicrosecond)
          ->UseRealTime();
  }
}

}  // namespace
}  // namespace cgdp

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  cgdp::register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
