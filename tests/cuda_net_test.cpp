// The CUDA backend beyond single layers: whole nets (fashion_cnn, resnet_small) forward and
// backward against the CPU, the solver's step, dropout masks bit for bit, a bad label failing the
// stream with the CPU's message, and the first lines of a run whose workers share a GPU. Skips
// with one line without a GPU.
#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>

#include "cgdp/device/cpu_device.hpp"
#include "cgdp/device/cuda_options.hpp"
#include "cgdp/device/devices.hpp"
#include "cgdp/layers/batch_norm_layer.hpp"
#include "cgdp/layers/registry.hpp"
#include "cgdp/net/model_file.hpp"
#include "cgdp/solver/solver.hpp"
#include "cgdp/train/trainer.hpp"

namespace cgdp {
namespace {

template <typename T>
std::vector<T> to_host(Device& device, const T* values, int64_t count) {
  std::vector<T> v(static_cast<size_t>(count));
  device.copy(v.data(), values, v.size() * sizeof(T));
  return v;
}

template <typename T>
void upload(Device& device, T* dst, const std::vector<T>& values) {
  device.copy(dst, values.data(), values.size() * sizeof(T));
}

double relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    diff += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
    norm += static_cast<double>(want[i]) * want[i];
  }
  return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

std::vector<float> random_values(size_t n, uint64_t seed, float lo, float hi) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

class CudaNet : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU on this machine: CUDA test not run";
    set_cuda_options({/*tf32=*/false, size_t{256} << 20, /*deterministic=*/true});
    gpu_ = make_device(DeviceKind::Cuda, 0);
    stream_ = gpu_->create_stream("compute");
    cpu_stream_ = cpu_.create_stream("compute");
  }
  void TearDown() override {
    stream_.reset();
    cpu_stream_.reset();
  }
  std::unique_ptr<Net<float>> net(const std::string& model, Device& device, int64_t batch) {
    return std::make_unique<Net<float>>(load_model(find_model_file(model)), Phase::Train, device,
                                        batch, 9);
  }
  void expect_solver_matches(const std::string& type, float clip);

  CpuDevice cpu_;
  std::unique_ptr<Device> gpu_;
  std::unique_ptr<Stream> stream_, cpu_stream_;
};

// One forward and backward of `model` on both backends from the same inputs: the loss and every
// parameter gradient within 1e-3 (float32 on both, through a dozen layers that sum in different
// orders), BatchNorm's running sums too.
void expect_net_matches(Net<float>& gpu, Net<float>& cpu, Stream& gpu_stream,
                        Stream& cpu_stream, int classes) {
  Device& g = gpu.device();
  const auto images = random_values(cpu.input_data().count(), 3, -1, 1);
  std::vector<float> labels(cpu.input_label()->count());
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<float>((i * 5 + 1) % classes);
  for (Net<float>* n : {&gpu, &cpu}) {
    upload(n->device(), n->input_data().mutable_data(), images);
    upload(n->device(), n->input_label()->mutable_data(), labels);
  }
  for (auto [n, s] : {std::pair{&gpu, &gpu_stream}, {&cpu, &cpu_stream}}) {
    const RunContext ctx{Phase::Train, s, 4, 2, 0};
    n->zero_param_diffs(*s);
    n->forward(ctx);
    for (int i = n->num_layers() - 1; i >= 0; --i) n->backward_layer(i, ctx);
    s->synchronize();
  }
  EXPECT_NEAR(gpu.loss(), cpu.loss(), 1e-4 * std::abs(cpu.loss()));
  for (const ParamSlot& s : cpu.param_slots())
    EXPECT_LE(relative_error(to_host(g, gpu.flat_diff().data() + s.offset, s.count),
                             to_host(cpu.device(), cpu.flat_diff().data() + s.offset, s.count)),
              1e-3)
        << s.name;
  auto gpu_state = gpu.state_blobs(), cpu_state = cpu.state_blobs();
  for (size_t i = 0; i < cpu_state.size(); ++i)
    EXPECT_LE(relative_error(to_host(g, gpu_state[i].second->data(), gpu_state[i].second->count()),
                             to_host(cpu.device(), cpu_state[i].second->data(), cpu_state[i].second->count())),
              1e-4)
        << cpu_state[i].first;
}

TEST_F(CudaNet, FashionCnnMatchesTheCpu) {
  auto gpu = net("fashion_cnn", *gpu_, 16), cpu = net("fashion_cnn", cpu_, 16);
  expect_net_matches(*gpu, *cpu, *stream_, *cpu_stream_, 10);
}

// Its BatchNorms run their Scales inside them on both backends (Net::fuse_batch_norm_scales),
// and on CUDA the forward of the ReLU after such a Scale too.
TEST_F(CudaNet, ResnetSmallMatchesTheCpu) {
  auto gpu = net("resnet_small", *gpu_, 8), cpu = net("resnet_small", cpu_, 8);
  const auto count_inside = [](const Net<float>& n, bool relus) {
    int count = 0;
    for (int i = 0; i < n.num_layers(); ++i)
      if (auto* bn = dynamic_cast<const BatchNormLayer<float>*>(&n.layer(i)))
        count += (relus ? bn->clamps_scaled_output() : bn->took_over_scale()) ? 1 : 0;
    return count;
  };
  EXPECT_GT(count_inside(*gpu, false), 0);
  EXPECT_EQ(count_inside(*gpu, false), count_inside(*cpu, false));
  EXPECT_GT(count_inside(*gpu, true), 0);
  EXPECT_EQ(count_inside(*cpu, true), 0);
  expect_net_matches(*gpu, *cpu, *stream_, *cpu_stream_, 10);
}

// Parameters are drawn on the host, so both backends start from the same bits; three steps of
// each solver type (its histories, weight decay, lr/decay multipliers, a gradient scale, and for
// SGD a clip that binds) then agree to rounding.
TEST_F(CudaNet, SolverStepMatchesTheCpu) {
  for (const char* type : {"SGD", "Nesterov", "AdaGrad", "RMSProp", "AdaDelta", "Adam"})
    for (const float clip : {-1.f, 0.05f}) {
      if (clip > 0 && std::string(type) != "SGD") continue;
      SCOPED_TRACE(cat(type, clip > 0 ? " clipped" : ""));
      expect_solver_matches(type, clip);
    }
}

void CudaNet::expect_solver_matches(const std::string& type, float clip) {
  auto gpu = net("fashion_cnn", *gpu_, 2), cpu = net("fashion_cnn", cpu_, 2);
  const int64_t n = cpu->learnable_count();
  const auto start = to_host(cpu_, cpu->flat_data().data(), n);
  ASSERT_EQ(0, std::memcmp(to_host(*gpu_, gpu->flat_data().data(), n).data(), start.data(), n * 4));
  proto::SolverParameter settings;
  settings.set_type(type);
  settings.set_base_lr(type == "AdaDelta" ? 1.f : 0.01f);
  settings.set_momentum(type == "AdaGrad" || type == "RMSProp" ? 0.f : 0.9f);
  settings.set_weight_decay(5e-4f);
  settings.set_clip_gradients(clip);
  Solver<float> gpu_solver(*gpu, make_lr_policy(settings), make_solver_settings(settings));
  Solver<float> cpu_solver(*cpu, make_lr_policy(settings), make_solver_settings(settings));
  for (int step = 0; step < 3; ++step) {
    const auto grads = random_values(static_cast<size_t>(n), 20 + step, -1, 1);
    upload(*gpu_, gpu->flat_diff().data(), grads);
    upload(cpu_, cpu->flat_diff().data(), grads);
    gpu_solver.step(*stream_, 0.5);
    cpu_solver.step(*cpu_stream_, 0.5);
    stream_->synchronize();
    cpu_stream_->synchronize();
  }
  EXPECT_EQ(gpu_solver.iteration(), 3);
  EXPECT_LE(relative_error(to_host(*gpu_, gpu->flat_data().data(), n), to_host(cpu_, cpu->flat_data().data(), n)), 1e-6);
  for (int h = 0; h < cpu_solver.settings().histories(); ++h)
    EXPECT_LE(relative_error(to_host(*gpu_, gpu_solver.history(h).data(), n), to_host(cpu_, cpu_solver.history(h).data(), n)),
              1e-5) << "history " << h;
}

proto::LayerParameter parse(const std::string& text) {
  proto::LayerParameter p;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &p)) << text;
  return p;
}

// Runs a one-layer forward on `device` (through `stream` when given) and returns top 0.
std::vector<float> forward_once(const std::string& text, Device& device, Stream* stream,
                                const std::vector<std::pair<Shape, std::vector<float>>>& inputs,
                                const RunContext& ctx) {
  auto layer = create_layer<float>(parse(text), device);
  std::vector<std::unique_ptr<Blob<float>>> blobs;
  BlobVec<float> bottom, top;
  for (const auto& [shape, values] : inputs) {
    blobs.push_back(std::make_unique<Blob<float>>(device, shape));
    upload(device, blobs.back()->mutable_data(), values);
    bottom.push_back(blobs.back().get());
  }
  blobs.push_back(std::make_unique<Blob<float>>(device));
  top.push_back(blobs.back().get());
  Rng rng(1);
  layer->setup(bottom, top, rng);
  if (stream) {
    stream->submit([&] { layer->forward(ctx, bottom, top); });
    stream->synchronize();
  } else {
    layer->forward(ctx, bottom, top);
  }
  return to_host(device, top[0]->data(), top[0]->count());
}

TEST_F(CudaNet, DropoutMasksAreTheCpuMasksBitForBit) {
  const std::string text = "name: 'drop7' type: 'Dropout' dropout_param { dropout_ratio: 0.4 }";
  const Shape shape{6, 5, 7};
  const auto x = random_values(static_cast<size_t>(count_of(shape)), 8, -1, 1);
  const RunContext ctx{Phase::Train, stream_.get(), 21, 13, 96};
  RunContext cpu_ctx = ctx;
  cpu_ctx.stream = nullptr;
  const auto gpu = forward_once(text, *gpu_, stream_.get(), {{shape, x}}, ctx);
  const auto cpu = forward_once(text, cpu_, nullptr, {{shape, x}}, cpu_ctx);
  ASSERT_EQ(gpu.size(), cpu.size());
  EXPECT_EQ(0, std::memcmp(gpu.data(), cpu.data(), gpu.size() * sizeof(float)));
}

// The GPU finds the bad label without the host waiting; the stream fails with the CPU's error.
TEST_F(CudaNet, BadLabelFailsTheStreamWithTheCpuMessage) {
  const std::string text = "name: 'loss' type: 'SoftmaxWithLoss'";
  const auto scores = random_values(40, 2, -1, 1);
  const std::vector<float> labels{1, 2, 3, 12};  // 12 is not one of the 10 classes
  std::string cpu_error, gpu_error;
  try {
    forward_once(text, cpu_, nullptr, {{{4, 10}, scores}, {{4}, labels}}, {Phase::Train, nullptr, 1, 0, 40});
  } catch (const DataError& e) {
    cpu_error = e.what();
  }
  auto failing = gpu_->create_stream("failing");  // a failed stream stays failed
  const RunContext ctx{Phase::Train, failing.get(), 1, 0, 40};  // the layer issues on ctx.stream
  try {
    forward_once(text, *gpu_, failing.get(), {{{4, 10}, scores}, {{4}, labels}}, ctx);
  } catch (const DataError& e) {
    gpu_error = e.what();
  }
  EXPECT_NE(cpu_error.find("label 12 of sample 43"), std::string::npos) << cpu_error;
  EXPECT_EQ(gpu_error, cpu_error);
}

TEST_F(CudaNet, WorkersSharingAGpuAreAnnouncedFirst) {
  TrainConfig c;
  c.model = "fashion_cnn";
  c.data = "synthetic";
  c.device_kind = "cuda";
  c.devices = cuda_device_count() + 1;
  c.batch = 4;
  c.solver.set_base_lr(0.01f);
  c.iterations = 2;
  c.test_interval = -1;
  c.test_samples = 8;
  c.plain_output = true;
  FILE* out = std::tmpfile();
  ASSERT_TRUE(out);
  Trainer(c, out).run();
  std::rewind(out);
  std::string text(1 << 16, '\0');
  text.resize(std::fread(text.data(), 1, text.size(), out));
  std::fclose(out);
  const std::string second_line = text.substr(text.find('\n') + 1, text.find('\n', text.find('\n') + 1) - text.find('\n') - 1);
  EXPECT_NE(second_line.find("share"), std::string::npos) << text;
  EXPECT_NE(second_line.find("round-robin"), std::string::npos) << text;
}

}  // namespace
}  // namespace cgdp
