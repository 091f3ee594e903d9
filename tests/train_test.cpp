// Training runs end to end on small synthetic data: resume is bit-for-bit, divergence names the
// iteration and layer, and mismatched data, models or checkpoints are refused with clear errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "cgdp/device/devices.hpp"
#include "cgdp/train/trainer.hpp"

namespace cgdp {
namespace {

namespace fs = std::filesystem;

class TrainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / cat("cgdp_train_test_", ::getpid(), "_",
                                           ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    sink_ = std::fopen("/dev/null", "w");
  }
  void TearDown() override {
    std::fclose(sink_);
    fs::remove_all(dir_);
  }
  TrainConfig small(const std::string& model) const {
    TrainConfig c;
    c.model = model;
    c.data = "synthetic";
    c.batch = 8;
    c.test_batch = 16;
    c.test_samples = 32;
    c.test_interval = -1;
    c.solver.set_base_lr(0.01f);
    c.solver.set_momentum(0.9f);
    c.solver.set_weight_decay(5e-4f);
    c.solver.set_lr_policy("step");
    c.solver.set_stepsize(3);
    c.solver.set_gamma(0.5f);
    c.seed = 11;
    c.plain_output = true;
    return c;
  }
  // Parameters, then layer state, copied from worker 0's device.
  std::vector<float> params_after(const TrainConfig& c) {
    Trainer t(c, sink_);
    t.run();
    Device& device = t.net().device();
    std::vector<float> out(static_cast<size_t>(t.net().learnable_count()));
    device.copy(out.data(), t.net().flat_data().data(), out.size() * sizeof(float));
    for (auto& [name, blob] : t.net().state_blobs()) {
      out.resize(out.size() + static_cast<size_t>(blob->count()));
      device.copy(out.data() + out.size() - blob->count(), blob->data(), blob->bytes());
    }
    return out;
  }
  TrainConfig on_cuda(TrainConfig c) const {
    c.device_kind = "cuda";
    return c;
  }
  std::string error_of(const TrainConfig& c) {
    try {
      Trainer t(c, sink_);
      t.run();
    } catch (const Error& e) {
      return e.what();
    }
    return "(no error)";
  }
  fs::path dir_;
  FILE* sink_ = nullptr;
};

// Resume: 2N straight vs N, checkpoint, resume, N more: identical bits (dropout, momentum,
// learning-rate steps and the data order all continue exactly).
void expect_resume_is_exact(TrainConfig base, const fs::path& dir,
                            const std::vector<float>& straight, const std::function<std::vector<float>(const TrainConfig&)>& run) {
  TrainConfig first = base;
  first.iterations = 5;
  first.snapshot_every = 5;
  first.snapshot_prefix = (dir / "run").string();
  run(first);
  TrainConfig second = base;
  second.iterations = 10;
  second.resume_path = (dir / "run_iter_5.ckpt").string();
  const auto resumed = run(second);
  ASSERT_EQ(resumed.size(), straight.size());
  size_t differing = 0;
  for (size_t i = 0; i < straight.size(); ++i) differing += std::memcmp(&straight[i], &resumed[i], 4) != 0;
  EXPECT_EQ(differing, 0u) << "of " << straight.size() << " values";
}

// The test net's activations live in the train net's gradient buffer, idle between iterations:
// testing after every iteration leaves the training (BatchNorm's statistics included) as it was.
TEST_F(TrainTest, TestsBetweenIterationsLeaveTheTrainingAsItWas) {
  TrainConfig c = small("resnet_small");
  c.iterations = 4;
  const auto untested = params_after(c);
  c.test_interval = 1;
  EXPECT_EQ(params_after(c), untested);
}

TEST_F(TrainTest, ResumeGivesIdenticalParametersWithDropout) {
  TrainConfig c = small("fashion_cnn");
  c.iterations = 10;
  const auto straight = params_after(c);
  expect_resume_is_exact(small("fashion_cnn"), dir_, straight,
                         [this](const TrainConfig& x) { return params_after(x); });
}

// Adam and AdaDelta keep two histories per parameter: both go into the checkpoint and come back,
// and Adam's bias correction continues from the resumed step.
TEST_F(TrainTest, ResumeIsExactWithTheTwoHistorySolvers) {
  for (const char* type : {"Adam", "AdaDelta"}) {
    TrainConfig base = small("fashion_cnn");
    base.solver.set_type(type);
    base.solver.set_base_lr(std::string(type) == "Adam" ? 0.001f : 1.0f);
    base.solver.set_weight_decay(0);
    TrainConfig c = base;
    c.iterations = 10;
    const auto straight = params_after(c);
    SCOPED_TRACE(type);
    expect_resume_is_exact(base, dir_ / type, straight, [this](const TrainConfig& x) { return params_after(x); });
  }
}

// An SGD checkpoint has one history: resuming it with Adam is refused, naming what is missing.
// Scaling the loss by a power of two changes no bit in fp32: every backward operation is linear
// in the seed and rounds the scaled value as it would the unscaled one, and the update divides
// the scale out exactly. A scale applied on one side only (seed or update) fails this.
TEST_F(TrainTest, APowerOfTwoLossScaleChangesNoBitInFp32) {
  TrainConfig c = small("fashion_cnn");
  c.devices = 2;  // through the host aggregator's sums
  c.iterations = 4;
  const auto plain = params_after(c);
  c.loss_scale = "1024";
  const auto scaled = params_after(c);
  ASSERT_EQ(plain.size(), scaled.size());
  EXPECT_EQ(std::memcmp(plain.data(), scaled.data(), plain.size() * sizeof(float)), 0);
}

// fp16 with a dynamic scale that starts far too high: the first steps overflow, are skipped
// (parameters untouched) and halve the scale until gradients are finite; a resumed run continues
// from the checkpoint's scale, so it reproduces the straight run bit for bit.
TEST_F(TrainTest, Fp16SkipsOverflowingStepsAndResumesWithItsLossScale) {
  TrainConfig base = small("fashion_cnn");
  base.precision = "fp16";
  base.loss_scale = "dynamic:1e6";
  base.loss_scale_growth_interval = 2;
  {
    TrainConfig all_skipped = base;  // a fixed scale that always overflows: no step runs
    all_skipped.loss_scale = "1e30";
    all_skipped.iterations = 3;
    Trainer t(all_skipped, sink_);
    std::vector<float> before(static_cast<size_t>(t.net().learnable_count()));
    std::copy_n(t.net().flat_data().data(), before.size(), before.data());
    t.run();
    EXPECT_EQ(t.loss_scale().skipped_steps(), 3);
    EXPECT_EQ(std::memcmp(before.data(), t.net().flat_data().data(), before.size() * sizeof(float)),
              0);
  }
  TrainConfig c = base;
  c.iterations = 10;
  Trainer t(c, sink_);
  t.run();
  EXPECT_GT(t.loss_scale().skipped_steps(), 0);
  EXPECT_LT(t.loss_scale().skipped_steps(), 8) << "too few steps ran to test the resume";
  EXPECT_LT(t.loss_scale().value(), 1e6);
  std::vector<float> straight(static_cast<size_t>(t.net().learnable_count()));
  std::copy_n(t.net().flat_data().data(), straight.size(), straight.data());
  expect_resume_is_exact(base, dir_, straight, [this](const TrainConfig& x) {
    Trainer r(x, sink_);
    r.run();
    return std::vector<float>(r.net().flat_data().begin(), r.net().flat_data().end());
  });
}

TEST_F(TrainTest, ACheckpointOfAnotherSolverTypeIsNamed) {
  TrainConfig first = small("fashion_cnn");
  first.iterations = 2;
  first.snapshot_every = 2;
  first.snapshot_prefix = (dir_ / "sgd").string();
  params_after(first);
  TrainConfig adam = small("fashion_cnn");
  adam.solver.set_type("Adam");
  adam.iterations = 4;
  adam.resume_path = (dir_ / "sgd_iter_2.ckpt").string();
  const std::string msg = error_of(adam);
  EXPECT_NE(msg.find("no tensor 'history2/"), std::string::npos) << msg;
  EXPECT_NE(msg.find("resume with the type that wrote it"), std::string::npos) << msg;
}

// clip_gradients: a threshold above the gradient's norm changes nothing; below it, the whole step
// is the free step times clip / norm (Caffe scales every gradient by one factor).
TEST_F(TrainTest, ClipGradientsScalesTheWholeGradientToTheNorm) {
  TrainConfig c = small("fashion_cnn");
  c.solver.set_momentum(0);
  c.solver.set_weight_decay(0);
  c.solver.set_lr_policy("fixed");
  c.iterations = 1;
  std::vector<float> before, mult;  // initial parameters (same seed every run), each one's lr_mult
  {
    Trainer start(c, sink_);
    before.resize(static_cast<size_t>(start.net().learnable_count()));
    start.net().device().copy(before.data(), start.net().flat_data().data(), before.size() * sizeof(float));
    mult.resize(before.size());
    for (const ParamSlot& s : start.net().param_slots())
      std::fill_n(mult.begin() + s.offset, s.count, s.lr_mult);
  }
  auto step = [&](float clip) {
    TrainConfig x = c;
    if (clip > 0) x.solver.set_clip_gradients(clip);
    std::vector<double> out(before.size());
    const auto after = params_after(x);
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<double>(before[i]) - after[i];
    return out;
  };
  const auto free_step = step(-1);
  double norm = 0;  // of the gradient: each step is lr * lr_mult * g
  for (size_t i = 0; i < free_step.size(); ++i) norm += std::pow(free_step[i] / (0.01f * mult[i]), 2);
  norm = std::sqrt(norm);
  ASSERT_GT(norm, 0.5);
  EXPECT_EQ(step(static_cast<float>(norm * 2)), free_step);
  const auto clipped = step(0.5f);
  const double factor = 0.5 / norm;
  // Each step is read back as a difference of floats (two ulps of the weight), and the scaled
  // gradient is rounded to float once more than the free one.
  size_t off = 0;
  for (size_t i = 0; i < clipped.size(); ++i)
    off += std::abs(clipped[i] - factor * free_step[i]) >
           2.5e-7 * std::abs(before[i]) + 5e-7 * std::abs(factor * free_step[i]) + 1e-12;
  EXPECT_EQ(off, 0u) << "of " << clipped.size() << " (factor " << factor << ")";
}

TEST_F(TrainTest, ResumeGivesIdenticalParametersAndBatchNormState) {
  TrainConfig c = small("resnet_small");
  c.iterations = 10;
  const auto straight = params_after(c);
  expect_resume_is_exact(small("resnet_small"), dir_, straight,
                         [this](const TrainConfig& x) { return params_after(x); });
}

// The same on the GPU: resumed CUDA runs reproduce the straight run bit for bit (deterministic
// cuDNN algorithms, chosen once per shape in the process).
TEST_F(TrainTest, ResumeOnCudaGivesIdenticalParametersWithDropout) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU on this machine: CUDA test not run";
  TrainConfig c = on_cuda(small("fashion_cnn"));
  c.iterations = 10;
  const auto straight = params_after(c);
  expect_resume_is_exact(on_cuda(small("fashion_cnn")), dir_, straight,
                         [this](const TrainConfig& x) { return params_after(x); });
}

TEST_F(TrainTest, ResumeOnCudaGivesIdenticalParametersAndBatchNormState) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU on this machine: CUDA test not run";
  TrainConfig c = on_cuda(small("resnet_small"));
  c.iterations = 10;
  const auto straight = params_after(c);
  expect_resume_is_exact(on_cuda(small("resnet_small")), dir_, straight,
                         [this](const TrainConfig& x) { return params_after(x); });
}

// bf16 on cuDNN's and cuBLAS's 16-bit kernels: deterministic (a resumed run gives the straight
// run's bits, its algorithms keyed apart from fp32's), really 16-bit (the parameters differ from
// an fp32 run's) and near fp32 (10 small steps from the same start).
TEST_F(TrainTest, Bf16OnCudaResumesBitForBitNearFp32) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU on this machine: CUDA test not run";
  TrainConfig c = on_cuda(small("fashion_cnn"));
  c.iterations = 10;
  const auto fp32 = params_after(c);
  c.precision = "bf16";
  const auto straight = params_after(c);
  ASSERT_EQ(fp32.size(), straight.size());
  double diff = 0, norm = 0;
  for (size_t i = 0; i < fp32.size(); ++i) {
    diff += std::pow(static_cast<double>(straight[i]) - fp32[i], 2);
    norm += std::pow(static_cast<double>(fp32[i]), 2);
  }
  EXPECT_GT(diff, 0) << "bf16 changed no parameter";
  EXPECT_LT(std::sqrt(diff / norm), 1e-2);
  TrainConfig base = on_cuda(small("fashion_cnn"));
  base.precision = "bf16";
  expect_resume_is_exact(base, dir_, straight,
                         [this](const TrainConfig& x) { return params_after(x); });
}

TEST_F(TrainTest, TrainingOnFashionMnistLowersTheTestLoss) {
  const std::string dir = "/usr/share/datasets/fashion-mnist";
  if (!fs::exists(dir)) GTEST_SKIP() << dir << " is missing (Debian's dataset-fashion-mnist)";
  TrainConfig c = small("fashion_cnn");
  c.data = "idx:" + dir;
  c.test_samples = 500;
  c.iterations = 1;
  Trainer untrained(c, sink_);
  const double before = untrained.evaluate().loss.value();
  c.iterations = 60;
  c.batch = 32;
  c.solver.set_lr_policy("fixed");
  Trainer trained(c, sink_);
  const auto r = trained.run();
  EXPECT_EQ(r.iterations, 60);
  EXPECT_LT(r.test_loss, 0.75 * before);
  EXPECT_GT(r.test_accuracy, 0.5);  // chance is 0.1
}

TEST_F(TrainTest, DivergenceNamesIterationAndLayer) {
  TrainConfig c = small("fashion_cnn");
  c.iterations = 50;
  c.solver.set_base_lr(1e12f);
  c.solver.set_lr_policy("fixed");
  const std::string msg = error_of(c);
  EXPECT_NE(msg.find("iteration "), std::string::npos) << msg;
  EXPECT_NE(msg.find("first non-finite output in layer '"), std::string::npos) << msg;
}

TEST_F(TrainTest, DataOfAnotherShapeIsRefused) {
  TrainConfig c = small("fashion_cnn");
  c.iterations = 1;
  c.data = "synthetic:3,32,32,10";
  const std::string msg = error_of(c);
  EXPECT_NE(msg.find("1x28x28"), std::string::npos) << msg;
  EXPECT_NE(msg.find("3x32x32"), std::string::npos) << msg;
}

TEST_F(TrainTest, MoreClassesInDataThanModelOutputsIsRefused) {
  TrainConfig c = small("fashion_cnn");
  c.iterations = 1;
  c.data = "synthetic:1,28,28,12";
  EXPECT_NE(error_of(c).find("predicts 10 classes"), std::string::npos) << error_of(c);
}

TEST_F(TrainTest, CheckpointOfAnotherModelIsRefused) {
  TrainConfig a = small("resnet_small");
  a.iterations = 2;
  a.snapshot_every = 2;
  a.snapshot_prefix = (dir_ / "other").string();
  params_after(a);
  TrainConfig b = small("fashion_cnn");
  b.iterations = 4;
  b.resume_path = (dir_ / "other_iter_2.ckpt").string();
  const std::string msg = error_of(b);
  EXPECT_NE(msg.find("different model"), std::string::npos) << msg;
  EXPECT_NE(msg.find("other_iter_2.ckpt"), std::string::npos) << msg;
}

TEST_F(TrainTest, CorruptCheckpointIsRefused) {
  TrainConfig a = small("fashion_cnn");
  a.iterations = 2;
  a.snapshot_every = 2;
  a.snapshot_prefix = (dir_ / "c").string();
  params_after(a);
  const fs::path path = dir_ / "c_iter_2.ckpt";
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(path) - 100));
    f.put('\x7f');
  }
  TrainConfig b = a;
  b.iterations = 4;
  b.snapshot_every = 0;
  b.resume_path = path.string();
  const std::string msg = error_of(b);
  EXPECT_NE(msg.find("c_iter_2.ckpt"), std::string::npos) << msg;
  EXPECT_NE(msg.find("corrupt"), std::string::npos) << msg;
}

TEST_F(TrainTest, SavedParametersAreSafetensorsWithEveryParameter) {
  TrainConfig c = small("fashion_cnn");
  c.iterations = 2;
  c.save_path = (dir_ / "final.safetensors").string();
  Trainer t(c, sink_);
  t.run();
  std::ifstream in(c.save_path, std::ios::binary);
  uint64_t header_len = 0;
  in.read(reinterpret_cast<char*>(&header_len), 8);
  std::string header(header_len, ' ');
  in.read(header.data(), static_cast<std::streamsize>(header_len));
  for (const ParamSlot& s : t.net().param_slots())
    EXPECT_NE(header.find("\"" + s.name + "\""), std::string::npos) << s.name;
  EXPECT_EQ(fs::file_size(c.save_path), 8 + header_len + t.net().learnable_count() * sizeof(float));
}

}  // namespace
}  // namespace cgdp
