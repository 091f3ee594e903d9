// What a net allocates: a TEST net keeps no gradients (and refuses backward), a layer's internal
// scratch has no gradient twin, and a Scale in place after a BatchNorm reads the BatchNorm's copy
// of its input instead of keeping its own, with the very same gradients as the Scale out of place.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <random>
#include <set>

#include "cgdp/core/error.hpp"
#include "cgdp/device/cpu_device.hpp"
#include "cgdp/device/measuring_device.hpp"
#include "cgdp/layers/scale_layer.hpp"
#include "cgdp/layers/split_layer.hpp"
#include "cgdp/net/model_file.hpp"
#include "cgdp/net/net.hpp"

namespace cgdp {
namespace {

constexpr int64_t kBatch = 4, kChannels = 3, kSize = 5;
constexpr int64_t kActivation = kBatch * kChannels * kSize * kSize * sizeof(double);

// conv -> BatchNorm (in place) -> Scale (in place, or into `scale_top`) -> pooling -> loss.
std::string bn_scale_net(const std::string& scale_top) {
  return cat(R"(
    layer { name: "data" type: "Input" top: "data" top: "label"
            input_param { shape { dim: 4 dim: 2 dim: 5 dim: 5 } shape { dim: 4 } } }
    layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
            convolution_param { num_output: 3 kernel_size: 3 pad: 1 weight_filler { type: "gaussian" std: 0.5 } } }
    layer { name: "bn" type: "BatchNorm" bottom: "conv" top: "conv" }
    layer { name: "scale" type: "Scale" bottom: "conv" top: ")", scale_top, R"("
            scale_param { bias_term: true filler { type: "uniform" min: 0.5 max: 1.5 } } }
    layer { name: "pool" type: "Pooling" bottom: ")", scale_top, R"(" top: "pool"
            pooling_param { pool: AVE global_pooling: true } }
    layer { name: "loss" type: "SoftmaxWithLoss" bottom: "pool" bottom: "label" top: "loss" }
  )");
}

// One forward and backward of `net` on fixed inputs: the parameter gradients and the input's
// value after the run.
std::vector<double> gradients(Net<double>& net) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> uni(-1, 1);
  for (double& x : net.input_data().mutable_data_span()) x = uni(rng);
  for (int i = 0; i < kBatch; ++i) net.input_label()->mutable_data()[i] = i % 3;
  const RunContext ctx;
  net.forward(ctx);
  for (double& g : net.flat_diff()) g = 0;
  for (int i = net.num_layers() - 1; i >= 0; --i) net.backward_layer(i, ctx);
  return {net.flat_diff().begin(), net.flat_diff().end()};
}

TEST(MemoryPlan, ScaleInPlaceAfterBatchNormKeepsNoCopyAndGivesTheSameGradients) {
  const auto in_place = parse_model(bn_scale_net("conv"), "in_place.prototxt");
  const auto apart = parse_model(bn_scale_net("scaled"), "apart.prototxt");
  Net<double> a(in_place, Phase::Train, default_cpu_device(), 0, 7, "in_place.prototxt");
  Net<double> b(apart, Phase::Train, default_cpu_device(), 0, 7, "apart.prototxt");
  const std::vector<double> ga = gradients(a), gb = gradients(b);
  ASSERT_EQ(ga.size(), gb.size());
  EXPECT_EQ(0, std::memcmp(ga.data(), gb.data(), ga.size() * sizeof(double)));
  EXPECT_NE(ga, std::vector<double>(ga.size(), 0.0));

  // In the train net, the Scale's input is BatchNorm's copy; in a TEST net neither keeps one.
  const auto* scale = dynamic_cast<const ScaleLayer<double>*>(&a.layer(3));
  ASSERT_NE(scale, nullptr);
  EXPECT_TRUE(scale->reads_kept_input());
  MeasuringDevice da, db;
  Net<double> ma(in_place, Phase::Test, da, 0, 7, "in_place.prototxt");
  Net<double> mb(apart, Phase::Test, db, 0, 7, "apart.prototxt");
  EXPECT_FALSE(dynamic_cast<const ScaleLayer<double>*>(&ma.layer(3))->reads_kept_input());
  // Out of place costs the Scale's top; in place nothing: no copy of the input. And the
  // BatchNorm of a TEST net costs only its statistics, not a normalised copy.
  EXPECT_EQ(db.memory_stats().device_bytes - da.memory_stats().device_bytes, kActivation);
  std::string without_bn = bn_scale_net("conv");
  without_bn.erase(without_bn.find("layer { name: \"bn\""), std::string("layer { name: \"bn\" type: \"BatchNorm\" bottom: \"conv\" top: \"conv\" }").size());
  MeasuringDevice dc;
  Net<double> mc(parse_model(without_bn, "no_bn.prototxt"), Phase::Test, dc, 0, 7, "no_bn.prototxt");
  ASSERT_EQ(mc.num_layers() + 1, ma.num_layers());
  EXPECT_LT(da.memory_stats().device_bytes - dc.memory_stats().device_bytes, kActivation / 4);
}

// Building a net never holds more than the built net: each layer's own parameters are filled on
// the host and wait there until the flat buffers take them, and get no gradient of their own.
// fc6-shaped weights (4 MiB) dwarf the activations here, so a layer's own copy beside the flat
// buffers would show.
TEST(MemoryPlan, BuildingANetHoldsNoLayersParametersBesideTheFlatBuffers) {
  const std::string text = R"(
    layer { name: "data" type: "Input" top: "data" top: "label"
            input_param { shape { dim: 2 dim: 1024 } shape { dim: 2 } } }
    layer { name: "fc" type: "InnerProduct" bottom: "data" top: "fc"
            inner_product_param { num_output: 1024 } }
    layer { name: "loss" type: "SoftmaxWithLoss" bottom: "fc" bottom: "label" top: "loss" }
  )";
  MeasuringDevice device;
  Net<float> net(parse_model(text, "fc.prototxt"), Phase::Train, device, 2, 1);
  const MemoryStats stats = device.memory_stats();
  EXPECT_EQ(net.learnable_count(), 1024 * 1024 + 1024);
  EXPECT_GE(stats.device_bytes, 2 * net.learnable_count() * 4);  // the flat values and gradients
  EXPECT_LE(stats.device_peak_bytes - stats.device_bytes, 64);   // a scalar comes and goes
}

// Nor does a test net that shares the train net's parameters: its layers' own values never touch
// its device (VGG-16's test net held fc6's 392 MiB there for a moment).
TEST(MemoryPlan, ATestNetNeverHoldsTheParametersItShares) {
  const std::string text = R"(
    layer { name: "data" type: "Input" top: "data" top: "label"
            input_param { shape { dim: 2 dim: 1024 } shape { dim: 2 } } }
    layer { name: "fc" type: "InnerProduct" bottom: "data" top: "fc"
            inner_product_param { num_output: 1024 weight_filler { type: "xavier" } } }
    layer { name: "loss" type: "SoftmaxWithLoss" bottom: "fc" bottom: "label" top: "loss" }
  )";
  const auto model = parse_model(text, "fc.prototxt");
  CpuDevice train_device(0), test_device(1);
  Net<float> train(model, Phase::Train, train_device, 2, 1);
  Net<float> test(model, Phase::Test, test_device, 2, 1, "fc.prototxt", ActivationMemory::Planned,
                  &train);
  const MemoryStats stats = test_device.memory_stats();
  EXPECT_LE(stats.device_peak_bytes, 64 * 1024)
      << "of a test net over " << train.learnable_count() << " shared values";
  const Blob<float>& w = *test.layer(1).params()[0];
  EXPECT_EQ(w.data(), train.layer(1).params()[0]->data());
  EXPECT_FALSE(w.values_on_host());
}

// A test net plans its activations in the train net's idle gradient buffer (grown to fit when it
// is smaller): it holds none of its own, and computes what a test net with its own arena does
// right after the train net's pass wrote its gradients there.
TEST(MemoryPlan, ATestNetRunsInTheTrainNetsIdleGradientBuffer) {
  const auto model = parse_model(bn_scale_net("scaled"), "m.prototxt");
  CpuDevice train_device(0), own_device(1), borrowing_device(2);
  Net<double> train(model, Phase::Train, train_device, kBatch, 7, "m.prototxt");
  Net<double> own(model, Phase::Test, own_device, kBatch, 7, "m.prototxt",
                  ActivationMemory::Planned, &train);
  own.plan_activations();
  const int64_t lender_before = train_device.memory_stats().device_bytes;
  Net<double> borrowing(model, Phase::Test, borrowing_device, kBatch, 7, "m.prototxt",
                        ActivationMemory::Planned, &train);
  borrowing.plan_activations(kNoArenaLimit, &train);
  ASSERT_TRUE(borrowing.arena_borrowed());
  EXPECT_FALSE(own.arena_borrowed());
  const int64_t arena = own.activation_plan().arena_bytes;
  EXPECT_GE(train.idle_between_passes().bytes, arena);
  EXPECT_LT(borrowing_device.memory_stats().device_bytes +
                (train_device.memory_stats().device_bytes - lender_before),
            own_device.memory_stats().device_bytes - arena / 2);
  gradients(train);  // a pass: its gradients now fill the borrowed bytes
  for (Net<double>* net : {&own, &borrowing}) {
    std::mt19937 gen(5);
    std::normal_distribution<double> normal;
    for (double& v : net->input_data().mutable_data_span()) v = normal(gen);
    for (int i = 0; i < kBatch; ++i) net->input_label()->mutable_data()[i] = (i + 1) % 3;
    net->forward({Phase::Test, nullptr, 1, 0, 0});
  }
  EXPECT_EQ(borrowing.loss(), own.loss());
  EXPECT_TRUE(std::isfinite(own.loss()));
}

// A second test net that needs more idle bytes than the first grows the lender's buffer: the
// first one's activations follow it there instead of staying in the bytes it freed, and it
// computes what a test net with an arena of its own does.
TEST(MemoryPlan, TestNetsBorrowingInTurnAllRunInTheGrownIdleBuffer) {
  const auto model = parse_model(bn_scale_net("scaled"), "m.prototxt");
  CpuDevice device(0);
  Net<double> train(model, Phase::Train, device, kBatch, 7, "m.prototxt");
  const auto small = make_test_net(model, train, device, kBatch, 7, "m.prototxt");
  const auto large = make_test_net(model, train, device, 16 * kBatch, 7, "m.prototxt");
  Net<double> own(model, Phase::Test, device, kBatch, 7, "m.prototxt", ActivationMemory::Planned,
                  &train);
  own.plan_activations();
  gradients(train);  // a pass: its gradients now fill the borrowed bytes
  for (Net<double>* net : {small.get(), &own}) {
    std::mt19937 gen(5);
    std::normal_distribution<double> normal;
    for (double& v : net->input_data().mutable_data_span()) v = normal(gen);
    for (int i = 0; i < kBatch; ++i) net->input_label()->mutable_data()[i] = (i + 1) % 3;
    net->forward({Phase::Test, nullptr, 1, 0, 0});
  }
  const auto idle = train.idle_between_passes();
  const auto* begin = static_cast<const char*>(idle.ptr);
  for (Net<double>* net : {small.get(), large.get()}) {
    const auto* values = reinterpret_cast<const char*>(net->input_data().data());
    EXPECT_TRUE(values >= begin && values < begin + idle.bytes) << "outside the lender's bytes";
  }
  EXPECT_EQ(small->loss(), own.loss());
  EXPECT_TRUE(std::isfinite(own.loss()));
}

// The values held on the host reach the flat buffer: two builds from one seed hold the same
// parameters, and not zeros.
TEST(MemoryPlan, ParametersHeldOnTheHostReachTheFlatBuffer) {
  Net<double> a(parse_model(bn_scale_net("scaled"), "m.prototxt"), Phase::Train,
                default_cpu_device(), kBatch, 7);
  Net<double> b(parse_model(bn_scale_net("scaled"), "m.prototxt"), Phase::Train,
                default_cpu_device(), kBatch, 7);
  const std::vector<double> va(a.flat_data().begin(), a.flat_data().end());
  EXPECT_EQ(va, std::vector<double>(b.flat_data().begin(), b.flat_data().end()));
  EXPECT_NE(std::count(va.begin(), va.end(), 0.0), static_cast<long>(va.size()));
  double scale_min = 1e9;  // the Scale's uniform [0.5, 1.5] filler survived the move
  for (const auto& p : a.layer(3).params()[0]->data_span()) scale_min = std::min(scale_min, p);
  EXPECT_GE(scale_min, 0.5);
}

TEST(MemoryPlan, ATestNetKeepsNoGradients) {
  const auto model = parse_model(bn_scale_net("scaled"), "m.prototxt");
  MeasuringDevice train_device, test_device;
  Net<double> train(model, Phase::Train, train_device, 0, 7, "m.prototxt");
  Net<double> test(model, Phase::Test, test_device, 0, 7, "m.prototxt");
  for (int i = 0; i < test.num_layers(); ++i)
    for (const Blob<double>* top : test.tops(i)) EXPECT_FALSE(top->has_diff()) << test.layer(i).name();
  EXPECT_TRUE(train.tops(1)[0]->has_diff());
  // No backward reads or writes the input's gradient (the convolution does not propagate to it).
  EXPECT_FALSE(train.input_data().has_diff());
  EXPECT_FALSE(train.input_label()->has_diff());
  // The test net is the train net less the gradients (the parameters', the planned buffer and
  // those activations that keep their own) and less BatchNorm's normalised copy (which keeps the
  // one element every blob starts with).
  const int64_t params = train.learnable_count() * static_cast<int64_t>(sizeof(double));
  std::set<const Blob<double>*> tops;
  for (int i = 0; i < train.num_layers(); ++i) tops.insert(train.tops(i).begin(), train.tops(i).end());
  int64_t own = 0;
  for (const Blob<double>* top : tops)
    if (top->has_diff() && !top->diff_is_planned()) own += static_cast<int64_t>(top->bytes());
  EXPECT_EQ(test_device.memory_stats().device_bytes,
            train_device.memory_stats().device_bytes - params - train.activation_gradient_bytes() - own -
                kActivation + static_cast<int64_t>(sizeof(double)));
  try {
    test.backward_layer(test.num_layers() - 1, RunContext{});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "layer 'loss': a TEST net keeps no gradients");
  }
}

// The planned gradients: two blobs whose gradients are alive in the same stretch of the backward
// pass (some layer between their first and last toucher) never share bytes, but where a layer's
// backward writes its input's over its output's (Layer::gradient_in_place: GoogLeNet's LRNs),
// and the plan is much smaller than a gradient per activation. On Caffe's GoogLeNet (branches,
// concats) and ResNet.
TEST(MemoryPlan, GradientsAliveTogetherNeverShareBytes) {
  for (const char* model : {"googlenet", "resnet_small"}) {
    const std::string path = find_model_file(model);
    MeasuringDevice device;
    Net<float> net(load_model(path), Phase::Train, device, 2, 1, path);
    struct Live {
      int first = 1 << 30, last = -1;
      const Blob<float>* blob = nullptr;
    };
    std::map<const Blob<float>*, Live> live;
    std::set<std::pair<const Blob<float>*, const Blob<float>*>> in_place;
    for (int i = 0; i < net.num_layers(); ++i)
      if (net.layer(i).gradient_in_place()) {
        in_place.insert({net.bottoms(i)[0], net.tops(i)[0]});
        in_place.insert({net.tops(i)[0], net.bottoms(i)[0]});
      }
    for (int i = 0; i < net.num_layers(); ++i)
      for (const BlobVec<float>* blobs : {&net.bottoms(i), &net.tops(i)})
        for (const Blob<float>* b : *blobs) {
          Live& l = live[b];
          l.blob = b;
          l.first = std::min(l.first, i);
          l.last = std::max(l.last, i);
        }
    std::vector<Live> planned;
    int64_t separate = 0;
    for (const auto& [blob, l] : live)
      if (blob->diff_is_planned()) {
        planned.push_back(l);
        separate += static_cast<int64_t>(blob->bytes());
      }
    ASSERT_GT(planned.size(), 10u) << model;
    for (size_t a = 0; a < planned.size(); ++a)
      for (size_t b = a + 1; b < planned.size(); ++b) {
        const Live &x = planned[a], &y = planned[b];
        if (x.first > y.last || y.first > x.last) continue;  // never alive together
        const char *xb = reinterpret_cast<const char*>(x.blob->diff()), *yb = reinterpret_cast<const char*>(y.blob->diff());
        if (in_place.count({x.blob, y.blob})) {
          EXPECT_EQ(xb, yb) << model << ": blobs " << a << ", " << b;
          continue;
        }
        EXPECT_TRUE(xb + x.blob->bytes() <= yb || yb + y.blob->bytes() <= xb) << model << ": blobs " << a << ", " << b;
      }
    EXPECT_LT(net.activation_gradient_bytes() * 3, separate) << model;
  }
}

// A residual block: the sum may write over the conv output nothing reads again (its conv's backward
// reads the conv's input; BatchNorm and Scale in place read their own copy). `guard` adds a PROD of
// both branches after the sum (its backward reads values; nothing uses its output), which keeps
// both alive; `sigmoid` puts an in-place Sigmoid (its backward reads its output) on both branches.
std::string residual_net(bool guard, bool sigmoid) {
  const std::string sig = sigmoid ? R"(
    layer { name: "sig_a" type: "Sigmoid" bottom: "a" top: "a" }
    layer { name: "sig_b" type: "Sigmoid" bottom: "b" top: "b" })" : "";
  const std::string guard_layer = guard ? R"(
    layer { name: "guard" type: "Eltwise" bottom: "a" bottom: "b" top: "guard" eltwise_param { operation: PROD } })" : "";
  return cat(R"(
    layer { name: "data" type: "Input" top: "data" top: "label"
            input_param { shape { dim: 4 dim: 2 dim: 5 dim: 5 } shape { dim: 4 } } }
    layer { name: "conv_a" type: "Convolution" bottom: "data" top: "a"
            convolution_param { num_output: 3 kernel_size: 3 pad: 1 weight_filler { type: "gaussian" std: 0.5 } } }
    layer { name: "bn" type: "BatchNorm" bottom: "a" top: "a" }
    layer { name: "scale" type: "Scale" bottom: "a" top: "a"
            scale_param { bias_term: true filler { type: "uniform" min: 0.5 max: 1.5 } } }
    layer { name: "conv_b" type: "Convolution" bottom: "data" top: "b"
            convolution_param { num_output: 3 kernel_size: 1 weight_filler { type: "gaussian" std: 0.5 } } })",
             sig, R"(
    layer { name: "sum" type: "Eltwise" bottom: "b" bottom: "a" top: "sum" })", guard_layer, R"(
    layer { name: "relu" type: "ReLU" bottom: "sum" top: "sum" }
    layer { name: "pool" type: "Pooling" bottom: "sum" top: "pool" pooling_param { pool: AVE global_pooling: true } }
    layer { name: "loss" type: "SoftmaxWithLoss" bottom: "pool" bottom: "label" top: "loss" }
  )");
}

const Blob<double>& top_of(const Net<double>& net, const std::string& layer) {
  for (int i = 0; i < net.num_layers(); ++i)
    if (net.layer(i).name() == layer) return *net.tops(i)[0];
  throw Error("no layer " + layer);
}

TEST(MemoryPlan, AResidualSumWritesOverABranchNothingReadsAgainWithTheSameGradients) {
  const auto reuse = parse_model(residual_net(false, false), "reuse.prototxt");
  const auto kept = parse_model(residual_net(true, false), "kept.prototxt");
  Net<double> a(reuse, Phase::Train, default_cpu_device(), 0, 7, "reuse.prototxt");
  Net<double> b(kept, Phase::Train, default_cpu_device(), 0, 7, "kept.prototxt");
  // The sum took branch b's memory (bottom 0; branch a would do too).
  EXPECT_TRUE(top_of(a, "sum").data_is_aliased());
  EXPECT_EQ(top_of(a, "sum").data(), top_of(a, "conv_b").data());
  EXPECT_FALSE(top_of(b, "sum").data_is_aliased());
  const std::vector<double> ga = gradients(a), gb = gradients(b);
  ASSERT_EQ(ga.size(), gb.size());
  EXPECT_EQ(0, std::memcmp(ga.data(), gb.data(), ga.size() * sizeof(double)));
  EXPECT_NE(ga, std::vector<double>(ga.size(), 0.0));
  // A branch whose values a backward reads is never written over; a TEST net is left alone.
  Net<double> c(parse_model(residual_net(false, true), "sig.prototxt"), Phase::Train, default_cpu_device(), 0, 7, "sig.prototxt");
  EXPECT_FALSE(top_of(c, "sum").data_is_aliased());
  Net<double> t(reuse, Phase::Test, default_cpu_device(), 0, 7, "reuse.prototxt");
  EXPECT_FALSE(top_of(t, "sum").data_is_aliased());
  // The train net with the sum in place costs one activation less than with its own output.
  MeasuringDevice with, without;
  Net<double> mw(reuse, Phase::Train, with, 0, 7, "reuse.prototxt");
  Net<double> mo(parse_model(residual_net(false, true), "sig.prototxt"), Phase::Train, without, 0, 7, "sig.prototxt");
  EXPECT_EQ(without.memory_stats().device_bytes - with.memory_stats().device_bytes, kActivation);
}

// Every residual sum of Caffe's ResNet-152 writes over its last branch.
TEST(MemoryPlan, EveryResidualSumOfResnet152TakesABranchsMemory) {
  const std::string path = find_model_file("resnet152");
  MeasuringDevice device;
  Net<float> net(load_model(path), Phase::Train, device, 1, 1, path);
  int sums = 0, over = 0;
  for (int i = 0; i < net.num_layers(); ++i)
    if (net.layer(i).type() == std::string("Eltwise")) {
      ++sums;
      over += net.tops(i)[0]->data_is_aliased();
    }
  EXPECT_EQ(sums, 50);
  EXPECT_EQ(over, sums);
}

// A fan-out's Split lets its tops read the bottom's values (no copies) unless a later layer
// writes a blob of that name in place (checked by name, so conservatively); either way the
// gradient matches central differences of the loss.
TEST(MemoryPlan, SplitSharesItsInputUnlessABranchWritesItInPlace) {
  const std::string head = R"(
    layer { name: "data" type: "Input" top: "data" top: "label"
            input_param { shape { dim: 4 dim: 2 dim: 5 dim: 5 } shape { dim: 4 } } }
    layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
            convolution_param { num_output: 3 kernel_size: 3 pad: 1 weight_filler { type: "gaussian" std: 0.5 } } }
  )";
  const std::string tail = R"(
    layer { name: "a" type: "Pooling" bottom: "conv" top: "a" pooling_param { pool: AVE global_pooling: true } }
    layer { name: "b" type: "Pooling" bottom: "conv" top: "b" pooling_param { pool: MAX global_pooling: true } }
    layer { name: "sum" type: "Eltwise" bottom: "a" bottom: "b" top: "sum" }
    layer { name: "loss" type: "SoftmaxWithLoss" bottom: "sum" bottom: "label" top: "loss" }
  )";
  const std::string in_place_branch = R"(
    layer { name: "a" type: "Pooling" bottom: "conv" top: "a" pooling_param { pool: AVE global_pooling: true } }
    layer { name: "relu" type: "ReLU" bottom: "conv" top: "conv" }
    layer { name: "sq" type: "TanH" bottom: "conv" top: "conv" }
    layer { name: "b" type: "Pooling" bottom: "conv" top: "b" pooling_param { pool: MAX global_pooling: true } }
    layer { name: "sum" type: "Eltwise" bottom: "a" bottom: "b" top: "sum" }
    layer { name: "loss" type: "SoftmaxWithLoss" bottom: "sum" bottom: "label" top: "loss" }
  )";
  for (const auto& [body, shares] : {std::pair{head + tail, true}, std::pair{head + in_place_branch, false}}) {
    Net<double> net(parse_model(body, "split.prototxt"), Phase::Train, default_cpu_device(), 0, 5, "split.prototxt");
    const SplitLayer<double>* split = nullptr;
    int at = -1;
    for (int i = 0; i < net.num_layers(); ++i)
      if (auto* s = dynamic_cast<const SplitLayer<double>*>(&net.layer(i))) split = s, at = i;
    ASSERT_NE(split, nullptr);
    EXPECT_EQ(split->shares_bottom_data(), shares);
    for (const Blob<double>* top : net.tops(at)) EXPECT_EQ(top->data() == net.bottoms(at)[0]->data(), shares);
    const std::vector<double> analytic = gradients(net);
    const double h = 1e-5;
    for (size_t k = 0; k < analytic.size(); k += 7) {
      const double kept = net.flat_data()[k];
      net.flat_data()[k] = kept + h;
      net.forward({});
      const double up = net.loss();
      net.flat_data()[k] = kept - h;
      net.forward({});
      const double down = net.loss();
      net.flat_data()[k] = kept;
      EXPECT_NEAR(analytic[k], (up - down) / (2 * h), 1e-6 * std::max(1.0, std::abs(analytic[k]))) << k;
    }
  }
}

// Dropout's mask is scratch: it costs one activation, not two.
TEST(MemoryPlan, ScratchHasNoGradient) {
  const std::string body = R"(
    layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 4 dim: 3 dim: 5 dim: 5 } } }
    layer { name: "drop" type: "Dropout" bottom: "data" top: "data" }
  )";
  MeasuringDevice with, without;
  Net<double> a(parse_model(body, "d.prototxt"), Phase::Train, with, 0, 1, "d.prototxt");
  Net<double> b(parse_model(R"(
    layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 4 dim: 3 dim: 5 dim: 5 } } }
  )", "i.prototxt"), Phase::Train, without, 0, 1, "i.prototxt");
  EXPECT_EQ(with.memory_stats().device_bytes - without.memory_stats().device_bytes, kActivation);
}

}  // namespace
}  // namespace cgdp
