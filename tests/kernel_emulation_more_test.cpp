// More of kernel_emulation_test (the same executable): the kernels of Accuracy, ArgMax, Crop,
// Dropout, Eltwise, the regression and metric losses, the neuron functions, SoftmaxWithLoss and
// stochastic pooling, run by the kernel emulator against their CPU layers' loops, restated here
// (this executable links no layer): bit for bit where the arithmetic is the same (inputs are picked
// so that products are exact where a compiler may contract a multiply-add), else against float64
// within |want - got| <= atol + rtol * |want|. Shapes of element counts that are no multiple of
// 256, over several blocks; the one-block reductions (Accuracy, the losses) over more positions
// than the block has threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "accuracy.cuh"
#include "argmax.cuh"
#include "cgdp/core/counter_rng.hpp"
#include "cgdp/core/error.hpp"
#include "cgdp/layers/neuron_functions.hpp"
#include "crop.cuh"
#include "dropout.cuh"
#include "eltwise.cuh"
#include "kernel_checks.hpp"
#include "losses.cuh"
#include "neuron.cuh"
#include "softmax_loss.cuh"
#include "stochastic_pooling.cuh"

namespace cgdp {
namespace {

using namespace kernel_checks;

// ---- helpers ----

// Values in steps of 2^-step_bits in [lo, hi): few significant bits, so that the products of two
// of them (or of one with a coefficient of a few bits) are exact and a contracted multiply-add
// rounds as a multiply and an add do.
template <typename T>
std::vector<T> stepped(int64_t n, double lo, double hi, int step_bits, uint64_t seed) {
  std::vector<T> v = uniform<T>(n, lo, hi, seed);
  for (T& x : v) x = static_cast<T>(std::ldexp(std::floor(std::ldexp(x, step_bits)), -step_bits));
  return v;
}

template <typename T>
constexpr double rtol_of() {  // a few roundings of T
  return std::is_same_v<T, float> ? 1e-6 : 1e-13;
}

template <typename T>
const char* type_name() {
  return std::is_same_v<T, float> ? "float" : "double";
}

// Class labels as the kernels take them, decoded: every `ignored_every`-th -1, else a class.
std::vector<int64_t> decoded_labels(int64_t n, int64_t classes, int64_t ignored_every,
                                    uint64_t seed) {
  std::vector<double> u = uniform<double>(n, 0, static_cast<double>(classes), seed);
  std::vector<int64_t> labels(n);
  for (int64_t k = 0; k < n; ++k)
    labels[k] = ignored_every > 0 && k % ignored_every == 3 ? -1 : static_cast<int64_t>(u[k]);
  return labels;
}

// ---- Accuracy (accuracy.cu, layers/accuracy_layer.cpp) ----

// The CPU layer's count, on decoded labels.
template <typename T>
T accuracy_reference(const std::vector<T>& scores, const std::vector<int64_t>& labels,
                     const kernels::ClassShape& s, int64_t top_k) {
  int64_t correct = 0, counted = 0;
  for (int64_t pos = 0; pos < s.outer * s.inner; ++pos) {
    const int64_t l = labels[pos];
    if (l < 0) continue;
    const T* score = scores.data() + pos / s.inner * s.classes * s.inner + pos % s.inner;
    const T target = score[l * s.inner];
    int64_t at_least_as_good = 0;
    for (int64_t c = 0; c < s.classes; ++c) at_least_as_good += !(score[c * s.inner] < target);
    correct += at_least_as_good <= top_k;
    ++counted;
  }
  return counted ? static_cast<T>(static_cast<double>(correct) / counted) : T(0);
}

template <typename T>
void check_accuracy() {
  // 371 positions (more than the block's threads), 7 classes; a single position per sample.
  for (const kernels::ClassShape s :
       {kernels::ClassShape{7, 5, 53}, kernels::ClassShape{300, 7, 1}})
    for (const int64_t top_k : {int64_t{1}, int64_t{2}, s.classes}) {
      SCOPED_TRACE(
          cat(type_name<T>(), " ", s.outer, "x", s.classes, "x", s.inner, ", top ", top_k));
      const int64_t positions = s.outer * s.inner;
      // Steps of 0.5: ties with the label's score, which count against it.
      std::vector<T> scores = stepped<T>(positions * s.classes, -2, 2, 1, 30);
      std::vector<int64_t> labels = decoded_labels(positions, s.classes, 6, 31);
      scores[4] = std::numeric_limits<T>::quiet_NaN();  // a NaN ranks above any label
      scores[(2 * s.classes + labels[2 * s.inner] % s.classes) * s.inner] =
          std::numeric_limits<T>::quiet_NaN();  // the label's own score
      const T want = accuracy_reference(scores, labels, s, top_k);
      T got = T(-1);
      kernels::accuracy(scores.data(), labels.data(), s, top_k, &got, nullptr);
      EXPECT_TRUE(same_bits(std::vector<T>{got}, std::vector<T>{want}));
      EXPECT_GT(want, T(0));
      if (top_k < s.classes) {
        EXPECT_LT(want, T(1));
      }

      std::vector<int64_t> none(positions, -1);  // every label ignored: 0
      kernels::accuracy(scores.data(), none.data(), s, top_k, &got, nullptr);
      EXPECT_EQ(got, T(0));
    }
}

TEST(Accuracy, TopKCountsAsTheCpuLayerWithTiesAndNaNsAgainstTheLabel) {
  check_accuracy<float>();
  check_accuracy<double>();
}

// ---- ArgMax (argmax.cu, layers/argmax_layer.cpp) ----

std::string describe(const kernels::ArgMaxGeometry& g) {
  return cat(g.rows, "rows_dim", g.dim, "_stride", g.stride, "_top", g.top_k,
             g.has_axis ? "_axis" : "", g.out_max_val ? "_max_val" : "");
}

// The CPU layer's partial sort: the top_k largest (value, index) pairs, ties to the larger index.
template <typename T>
std::vector<T> argmax_reference(const std::vector<T>& x, const kernels::ArgMaxGeometry& g,
                                size_t outputs) {
  std::vector<T> y(outputs);
  for (int64_t i = 0; i < g.rows; ++i) {
    std::vector<std::pair<T, int64_t>> row(static_cast<size_t>(g.dim));
    for (int64_t j = 0; j < g.dim; ++j)
      row[j] = {x[(i / g.stride * g.dim + j) * g.stride + i % g.stride], j};
    std::partial_sort(row.begin(), row.begin() + g.top_k, row.end(),
                      std::greater<std::pair<T, int64_t>>());
    for (int64_t j = 0; j < g.top_k; ++j) {
      const int64_t along = (i / g.stride * g.top_k + j) * g.stride + i % g.stride;
      if (!g.has_axis && g.out_max_val) {
        y[2 * i * g.top_k + j] = static_cast<T>(row[j].second);
        y[2 * i * g.top_k + g.top_k + j] = row[j].first;
      } else {
        y[along] = g.out_max_val ? row[j].first : static_cast<T>(row[j].second);
      }
    }
  }
  return y;
}

template <typename T>
void check_argmax(const kernels::ArgMaxGeometry& g) {
  SCOPED_TRACE(cat(type_name<T>(), " ", describe(g)));
  std::vector<T> x = stepped<T>(g.rows * g.dim, -2, 2, 1, 32);  // steps of 0.5: ties
  for (size_t k = 0; k < x.size(); k += 7)
    if (x[k] == T(0)) x[k] = -T(0);  // -0 ties with +0
  const size_t outputs =
      static_cast<size_t>(g.rows * g.top_k * (g.out_max_val && !g.has_axis ? 2 : 1));
  std::vector<T> y(outputs, T(99));
  kernels::argmax_forward(x.data(), g, y.data(), nullptr);
  EXPECT_TRUE(same_bits(y, argmax_reference(x, g, outputs)));
}

TEST(ArgMax, TopKPicksAsTheCpuLayersPartialSortWithTiesToTheLargerIndex) {
  // {rows, dim, stride, top_k, has_axis, out_max_val}: rows over two blocks, 300 and 525.
  for (const kernels::ArgMaxGeometry g : {kernels::ArgMaxGeometry{300, 10, 1, 1, false, false},
                                          kernels::ArgMaxGeometry{300, 10, 1, 3, false, true},
                                          kernels::ArgMaxGeometry{525, 6, 75, 2, true, false},
                                          kernels::ArgMaxGeometry{525, 6, 75, 6, true, true},
                                          kernels::ArgMaxGeometry{3, 1, 1, 1, false, true}}) {
    check_argmax<float>(g);
    check_argmax<double>(g);
  }
}

// ---- Crop (crop.cu, layers/crop_layer.cpp) ----

// Top element i's place in bottom 0, from its coordinates (not the kernel's running strides):
// each coordinate shifted by its offset, then dotted with bottom 0's row-major strides.
int64_t crop_source(int64_t i, const kernels::CropGeometry& g) {
  std::vector<int64_t> coordinate(static_cast<size_t>(g.axes)), stride(coordinate.size(), 1);
  for (int a = 0; a < g.axes; ++a) {
    int64_t below = 1;
    for (int b = a + 1; b < g.axes; ++b) below *= g.top[b];
    coordinate[static_cast<size_t>(a)] = i / below % g.top[a];
    for (int b = a + 1; b < g.axes; ++b) stride[static_cast<size_t>(a)] *= g.in[b];
  }
  int64_t index = 0;
  for (int a = 0; a < g.axes; ++a)
    index += (coordinate[static_cast<size_t>(a)] + g.offset[a]) * stride[static_cast<size_t>(a)];
  return index;
}

kernels::CropGeometry crop_geometry(std::vector<std::array<int64_t, 3>> in_top_offset) {
  kernels::CropGeometry g;
  g.axes = static_cast<int>(in_top_offset.size());
  for (int a = 0; a < g.axes; ++a) {
    g.in[a] = in_top_offset[a][0];
    g.top[a] = in_top_offset[a][1];
    g.offset[a] = in_top_offset[a][2];
  }
  return g;
}

template <typename T>
void check_crop(const kernels::CropGeometry& g) {
  int64_t in_count = 1, top_count = 1;
  for (int a = 0; a < g.axes; ++a) in_count *= g.in[a], top_count *= g.top[a];
  SCOPED_TRACE(cat(type_name<T>(), " ", g.axes, " axes, ", top_count, " of ", in_count));
  const std::vector<T> x = uniform<T>(in_count, -1, 1, 33), dy = uniform<T>(top_count, -1, 1, 34);
  std::vector<T> y(top_count, T(7)), y_want(top_count), dx(in_count, T(7)), dx_want(in_count, T(0));
  for (int64_t i = 0; i < top_count; ++i) {
    y_want[i] = x[crop_source(i, g)];
    dx_want[crop_source(i, g)] = dy[i];
  }
  kernels::crop_forward(x.data(), g, top_count, y.data(), nullptr);
  kernels::crop_backward(dy.data(), g, top_count, in_count, dx.data(), nullptr);
  EXPECT_TRUE(same_bits(y, y_want)) << "forward";
  EXPECT_TRUE(same_bits(dx, dx_want)) << "backward (zero outside the crop)";
}

TEST(Crop, ForwardAndBackwardMoveEachElementAsTheCpuLayer) {
  // {in, top, offset} per axis: 4-D with offsets on every axis (336 of 1485), one axis, and all
  // kMaxCropAxes axes (432 of 2304 elements).
  for (const kernels::CropGeometry& g :
       {crop_geometry({{3, 2, 1}, {5, 4, 1}, {9, 7, 1}, {11, 6, 3}}),
        crop_geometry({{1000, 700, 250}}),
        crop_geometry({{2, 2, 0},
                       {3, 2, 1},
                       {2, 1, 1},
                       {4, 3, 0},
                       {2, 2, 0},
                       {3, 3, 0},
                       {2, 1, 0},
                       {4, 2, 2}})}) {
    check_crop<float>(g);
    check_crop<double>(g);
  }
}

// ---- Dropout (dropout.cu, layers/dropout_layer.cpp) ----

// The CPU layer's draw_mask: element j of global sample s from (seed, layer, iteration, s, j).
template <typename T>
std::vector<T> dropout_mask(uint64_t step_key, int64_t sample_offset, int64_t samples,
                            int64_t per_sample, double p) {
  const T scale = static_cast<T>(1.0 / (1.0 - p));
  std::vector<T> mask(samples * per_sample);
  for (int64_t n = 0; n < samples; ++n) {
    const CounterRng sample(fold_counter(step_key, static_cast<uint64_t>(sample_offset + n)));
    for (int64_t j = 0; j < per_sample; ++j)
      mask[n * per_sample + j] = sample.uniform(j) < p ? T(0) : scale;
  }
  return mask;
}

template <typename T>
void check_dropout(double p) {
  SCOPED_TRACE(cat(type_name<T>(), ", ratio ", p));
  constexpr int64_t kSamples = 5, kPerSample = 347;  // 1735 elements
  const int64_t n = kSamples * kPerSample;
  const CounterRng step({uint64_t{42}, hash_name("drop7"), uint64_t{1234}});
  const T keep_scale = static_cast<T>(1.0 / (1.0 - p));
  const std::vector<T> x = uniform<T>(n, -2, 2, 35), dy = uniform<T>(n, -1, 1, 36);
  const std::vector<T> mask_want = dropout_mask<T>(step.key(), 0, kSamples, kPerSample, p);
  std::vector<T> y(n, T(7)), mask(n, T(7)), y_want(n);
  for (int64_t i = 0; i < n; ++i) y_want[i] = x[i] * mask_want[i];
  kernels::dropout_forward(x.data(), y.data(), mask.data(), kSamples, kPerSample, step.key(), 0, p,
                           keep_scale, nullptr);
  EXPECT_TRUE(same_bits(mask, mask_want)) << "mask";
  EXPECT_TRUE(same_bits(y, y_want)) << "y";
  const auto dropped = std::count(mask.begin(), mask.end(), T(0));
  EXPECT_NEAR(static_cast<double>(dropped) / n, p, 5 * std::sqrt(p * (1 - p) / n) + 1e-12);

  // A worker holding samples 2..4 of the batch draws their masks: its rows of the whole batch's.
  std::vector<T> slice(3 * kPerSample, T(7)), slice_mask(3 * kPerSample, T(7));
  kernels::dropout_forward(x.data() + 2 * kPerSample, slice.data(), slice_mask.data(), 3,
                           kPerSample, step.key(), 2, p, keep_scale, nullptr);
  EXPECT_TRUE(
      same_bits(slice_mask, std::vector<T>(mask_want.begin() + 2 * kPerSample, mask_want.end())))
      << "mask of samples 2..4 at sample offset 2";

  std::vector<T> in_place = x;  // y may be x
  kernels::dropout_forward(in_place.data(), in_place.data(), mask.data(), kSamples, kPerSample,
                           step.key(), 0, p, keep_scale, nullptr);
  EXPECT_TRUE(same_bits(in_place, y_want)) << "in place";

  std::vector<T> dx(n, T(7)), dx_want(n);
  for (int64_t i = 0; i < n; ++i) dx_want[i] = dy[i] * mask_want[i];
  kernels::dropout_backward(dy.data(), mask.data(), dx.data(), n, nullptr);
  EXPECT_TRUE(same_bits(dx, dx_want)) << "dx";
}

TEST(Dropout, MasksAreTheCpuLayersBitForBitFromTheCounters) {
  for (const double p : {static_cast<double>(0.3f), static_cast<double>(0.75f), 0.0}) {
    check_dropout<float>(p);
    check_dropout<double>(p);
  }
}

// ---- Eltwise (eltwise.cu, layers/eltwise_layer.cpp) ----

const char* op_name(kernels::EltwiseOp op) {
  return op == kernels::EltwiseOp::Sum ? "sum" : op == kernels::EltwiseOp::Prod ? "prod" : "max";
}

template <typename T>
void check_eltwise(kernels::EltwiseOp op, int count) {
  SCOPED_TRACE(cat(type_name<T>(), " ", op_name(op), " of ", count));
  constexpr int64_t n = 1000;
  const bool max = op == kernels::EltwiseOp::Max;
  std::vector<std::vector<T>> x;
  kernels::EltwiseInputs<T> in{};
  in.count = count;
  const double coefficients[] = {0.5, -1.5, 2, 1, 0.25, -3};
  for (int b = 0; b < count; ++b) {
    // Steps of 1/64 (products with the coefficients exact), or of 0.5 for MAX (ties).
    x.push_back(stepped<T>(n, -4, 4, max ? 1 : 6, 40 + b));
    in.x[b] = x.back().data();
    in.coeff[b] = op == kernels::EltwiseOp::Sum ? static_cast<T>(coefficients[b % 6]) : T(1);
  }
  const std::vector<T> dy = uniform<T>(n, -1, 1, 39);

  // The CPU layer's loops (its two-bottom SUM is the same expression, vectorised).
  std::vector<T> y_want(n), winner_want(n, T(5));
  for (int64_t i = 0; i < n; ++i) {
    T acc = op == kernels::EltwiseOp::Sum ? in.coeff[0] * x[0][i] : x[0][i];
    int best = 0;
    for (int b = 1; b < count; ++b) {
      const T v = x[b][i];
      if (op == kernels::EltwiseOp::Sum) {
        acc += in.coeff[b] * v;
      } else if (op == kernels::EltwiseOp::Prod) {
        acc *= v;
      } else if (v > acc) {
        acc = v;
        best = b;
      }
    }
    y_want[i] = acc;
    if (max) winner_want[i] = static_cast<T>(best);
  }
  std::vector<T> y(n, T(7)), winner(n, T(5));
  kernels::eltwise_forward(in, op, n, y.data(), winner.data(), nullptr);
  EXPECT_TRUE(same_bits(y, y_want)) << "y";
  EXPECT_TRUE(same_bits(winner, winner_want)) << "winner";

  for (int b = 0; b < count; ++b) {
    std::vector<T> dx(n, T(7)), dx_want(n);
    for (int64_t i = 0; i < n; ++i) {
      if (op == kernels::EltwiseOp::Sum) {
        dx_want[i] = in.coeff[b] * dy[i];
      } else if (op == kernels::EltwiseOp::Prod) {
        T others = 1;
        for (int k = 0; k < count; ++k)
          if (k != b) others *= x[k][i];
        dx_want[i] = dy[i] * others;
      } else {
        dx_want[i] = winner_want[i] == static_cast<T>(b) ? dy[i] : T(0);
      }
    }
    kernels::eltwise_backward(in, op, b, n, dy.data(), winner.data(), dx.data(), nullptr);
    EXPECT_TRUE(same_bits(dx, dx_want)) << "dx of bottom " << b;
  }
}

TEST(Eltwise, SumProdAndMaxMatchTheCpuLayerBitForBit) {
  const std::pair<kernels::EltwiseOp, int> cases[] = {
      {kernels::EltwiseOp::Sum, 2},  {kernels::EltwiseOp::Sum, 3}, {kernels::EltwiseOp::Sum, 32},
      {kernels::EltwiseOp::Prod, 4}, {kernels::EltwiseOp::Max, 3}, {kernels::EltwiseOp::Max, 1}};
  for (const auto& [op, count] : cases) {
    check_eltwise<float>(op, count);
    check_eltwise<double>(op, count);
  }
}

// ---- the neuron functions (neuron.cu, layers/neuron_functions.hpp) ----

// x over [-3, 3) and the edges (zeros, BNLL's cap of 50, large magnitudes).
template <typename T>
std::vector<T> neuron_inputs() {
  std::vector<T> x = uniform<T>(777, -3, 3, 37);
  const T edges[] = {T(0), -T(0), T(50), T(60), T(-60), T(1e-30), T(-1e-30), T(20)};
  std::copy(std::begin(edges), std::end(edges), x.begin());
  return x;
}

// The CPU layer's loops: y = f.forward(x), dx = f.backward(x, y, dy).
template <typename T, typename F>
void check_neuron(const char* name, const F& f, std::vector<T> x) {
  SCOPED_TRACE(cat(type_name<T>(), " ", name));
  const int64_t n = static_cast<int64_t>(x.size());
  const std::vector<T> dy = uniform<T>(n, -1, 1, 38);
  std::vector<T> y(n, T(7)), dx(n, T(7)), y_want(n), dx_want(n);
  for (int64_t i = 0; i < n; ++i) y_want[i] = f.forward(x[i]);
  for (int64_t i = 0; i < n; ++i) dx_want[i] = f.backward(x[i], y_want[i], dy[i]);
  kernels::neuron_forward(x.data(), y.data(), n, f, nullptr);
  kernels::neuron_backward(x.data(), y.data(), dy.data(), dx.data(), n, f, nullptr);
  EXPECT_TRUE(same_bits(y, y_want, /*nan_equal=*/true)) << "y";
  EXPECT_TRUE(same_bits(dx, dx_want, /*nan_equal=*/true)) << "dx";
}

template <typename T>
void check_neurons() {
  const std::vector<T> x = neuron_inputs<T>();
  std::vector<T> positive = x;  // Log's and Power's bases, 2 + x / 2 and 7 + 2 x, stay > 0
  for (T& v : positive) v = std::clamp(v, T(-3), T(3));
  check_neuron("Sigmoid", neuron::Sigmoid<T>{}, x);
  check_neuron("TanH", neuron::TanH<T>{}, x);
  check_neuron("AbsVal", neuron::AbsVal<T>{}, x);
  check_neuron("BNLL", neuron::BNLL<T>{}, x);
  check_neuron("Power", neuron::Power<T>{T(2.5), T(0.5), T(2)}, positive);
  check_neuron("Power, constant", neuron::Power<T>{T(2), T(0), T(1.5)}, x);
  check_neuron("Exp", neuron::Exp<T>{T(0.5), T(1.25)}, x);
  check_neuron("Log", neuron::Log<T>{T(2), T(7), T(1) / static_cast<T>(std::log(3.0))}, positive);
  check_neuron("ELU", neuron::ELU<T>{T(0.7)}, x);
  check_neuron("Threshold", neuron::Threshold<T>{T(0.25)}, x);
}

TEST(Neuron, EveryFunctionMatchesTheCpuLayerBitForBit) {
  check_neurons<float>();
  check_neurons<double>();
}

// ---- EuclideanLoss, SigmoidCrossEntropyLoss, ContrastiveLoss, HingeLoss (losses.cu,
// layers/loss_layers.cpp) ----

template <typename T>
void check_euclidean() {
  SCOPED_TRACE(type_name<T>());
  constexpr int64_t n = 1050, batch = 7;
  const std::vector<T> a = uniform<T>(n, -2, 2, 50), b = uniform<T>(n, -2, 2, 51);
  std::vector<T> diff(n, T(7)), diff_want(n), loss(1, T(-1));
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    diff_want[i] = a[i] - b[i];
    sum += static_cast<double>(diff_want[i]) * diff_want[i];
  }
  kernels::euclidean_forward(a.data(), b.data(), diff.data(), n, batch, loss.data(), nullptr);
  EXPECT_TRUE(same_bits(diff, diff_want)) << "diff";
  EXPECT_TRUE(close_to(loss, {sum / batch / 2}, 0, rtol_of<T>())) << "loss";

  const T loss_weight = T(0.75);
  for (const T sign : {T(1), T(-1)}) {
    const T sign_over_batch = sign / static_cast<T>(batch);  // as the CUDA layer passes it
    std::vector<T> dx(n, T(7)), dx_same(n);
    std::vector<double> dx_want(n);
    for (int64_t i = 0; i < n; ++i) {
      dx_same[i] = sign_over_batch * loss_weight * diff[i];
      dx_want[i] = static_cast<double>(sign) * loss_weight / batch * diff[i];
    }
    kernels::scaled_by_loss_weight(diff.data(), n, sign_over_batch, &loss_weight, dx.data(),
                                   nullptr);
    EXPECT_TRUE(same_bits(dx, dx_same)) << "dx, sign " << sign;
    EXPECT_TRUE(close_to(dx, dx_want, 0, 2 * rtol_of<T>())) << "dx, sign " << sign;
  }
}

TEST(Losses, EuclideanMatchesFloat64) {
  check_euclidean<float>();
  check_euclidean<double>();
}

template <typename T>
void check_sigmoid_cross_entropy(bool has_ignore, int mode, bool all_ignored) {
  SCOPED_TRACE(cat(type_name<T>(), ", ignore ", has_ignore, ", mode ", mode,
                   all_ignored ? ", all ignored" : ""));
  constexpr int64_t n = 1050, outer = 7;
  const T ignore = T(-1);
  std::vector<T> x = uniform<T>(n, -6, 6, 52), t = uniform<T>(n, 0, 1, 53);
  x[0] = T(40), x[1] = T(-40);  // log1p(exp) of both signs far out
  for (int64_t i = 0; i < n; ++i) {
    if (i % 3 == 0) t[i] = t[i] < T(0.5) ? T(0) : T(1);
    if ((has_ignore && i % 9 == 4) || all_ignored) t[i] = ignore;
  }
  double sum = 0, valid = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (has_ignore && t[i] == ignore) continue;
    const double v = x[i], positive = v >= 0;
    sum -= v * (t[i] - positive) - std::log1p(std::exp(v - 2 * v * positive));
    valid += 1;
  }
  const double normalizer_want = std::max(1.0, mode == 0   ? n
                                               : mode == 1 ? valid
                                               : mode == 2 ? static_cast<double>(outer)
                                                           : 1.0);
  std::vector<T> loss(1, T(-1));
  double normalizer = -1;
  kernels::sigmoid_ce_forward(x.data(), t.data(), n, has_ignore, ignore, mode, outer, loss.data(),
                              &normalizer, nullptr);
  EXPECT_EQ(normalizer, normalizer_want);
  EXPECT_TRUE(close_to(loss, {sum / normalizer_want}, 0, rtol_of<T>())) << "loss";

  const T loss_weight = T(0.5);
  std::vector<T> dx(n, T(7));
  std::vector<double> dx_want(n);
  for (int64_t i = 0; i < n; ++i) {
    const bool ignored = has_ignore && t[i] == ignore;
    dx_want[i] = ignored ? 0.0
                         : loss_weight / normalizer_want *
                               (1 / (1 + std::exp(-static_cast<double>(x[i]))) - t[i]);
  }
  kernels::sigmoid_ce_backward(x.data(), t.data(), n, has_ignore, ignore, &normalizer, &loss_weight,
                               dx.data(), nullptr);
  // sigmoid(x) - t cancels where the sigmoid nears the target: a rounding of 1 in T, scaled.
  const double atol = 2 * std::numeric_limits<T>::epsilon() * loss_weight / normalizer_want;
  EXPECT_TRUE(close_to(dx, dx_want, atol, 4 * rtol_of<T>())) << "dx";
}

TEST(Losses, SigmoidCrossEntropyMatchesFloat64InEveryNormalization) {
  for (const bool has_ignore : {false, true})
    for (const int mode : {0, 1, 2, 3}) {
      check_sigmoid_cross_entropy<float>(has_ignore, mode, false);
      check_sigmoid_cross_entropy<double>(has_ignore, mode, false);
    }
  check_sigmoid_cross_entropy<float>(true, 1, true);  // VALID of none: 1, not 0
}

template <typename T>
void check_contrastive(bool legacy) {
  SCOPED_TRACE(cat(type_name<T>(), legacy ? ", legacy" : ""));
  constexpr int64_t pairs = 300, dim = 3;  // more pairs than the block's threads
  const T margin = T(1);
  const std::vector<T> a = uniform<T>(pairs * dim, -1, 1, 54);
  const std::vector<double> direction = uniform<double>(pairs * dim, -1, 1, 55),
                            norm = uniform<double>(pairs, 0, 1, 56);
  std::vector<T> b(pairs * dim), similar(pairs);
  for (int64_t i = 0; i < pairs; ++i) {
    // Distances of 0.3 to 0.9 or 1.1 to 1.7, away from the margin: the float and float64
    // comparisons with it agree.
    const double length = norm[i] < 0.5 ? 0.3 + 1.2 * norm[i] : 1.1 + 1.2 * (norm[i] - 0.5);
    double square = 0;
    for (int64_t c = 0; c < dim; ++c) square += direction[i * dim + c] * direction[i * dim + c];
    for (int64_t c = 0; c < dim; ++c)
      b[i * dim + c] =
          static_cast<T>(a[i * dim + c] + length * direction[i * dim + c] / std::sqrt(square));
    similar[i] = T(i % 3 == 0);
  }
  std::vector<T> diff(pairs * dim, T(7)), diff_want(pairs * dim), dist_sq(pairs, T(7)), loss(1);
  std::vector<double> dist_sq_want(pairs);
  double sum = 0;
  for (int64_t i = 0; i < pairs; ++i) {
    double sq = 0;
    for (int64_t c = 0; c < dim; ++c) {
      diff_want[i * dim + c] = a[i * dim + c] - b[i * dim + c];
      sq += static_cast<double>(diff_want[i * dim + c]) * diff_want[i * dim + c];
    }
    dist_sq_want[i] = sq;
    if (similar[i] != T(0))
      sum += sq;
    else if (legacy)
      sum += std::max(margin - sq, 0.0);
    else
      sum += std::pow(std::max(margin - std::sqrt(sq), 0.0), 2);
  }
  kernels::contrastive_forward(a.data(), b.data(), similar.data(), pairs, dim, margin, legacy,
                               diff.data(), dist_sq.data(), loss.data(), nullptr);
  EXPECT_TRUE(same_bits(diff, diff_want)) << "diff";
  EXPECT_TRUE(close_to(dist_sq, dist_sq_want, 0, rtol_of<T>())) << "dist_sq";
  EXPECT_TRUE(close_to(loss, {sum / pairs / 2}, 0, rtol_of<T>())) << "loss";

  const T loss_weight = T(0.75);
  for (const T sign : {T(1), T(-1)}) {
    std::vector<T> dx(pairs * dim, T(7));
    std::vector<double> dx_want(pairs * dim);
    const double alpha = sign * static_cast<double>(loss_weight) / pairs;
    for (int64_t i = 0; i < pairs; ++i) {
      const double d = dist_sq_want[i], dist = std::sqrt(d), gap = margin - dist;
      double factor = alpha;
      if (similar[i] == T(0))
        factor = legacy    ? (margin - d > 0 ? -alpha : 0.0)
                 : gap > 0 ? -alpha * gap / (dist + 1e-4)
                           : 0;
      for (int64_t c = 0; c < dim; ++c) dx_want[i * dim + c] = factor * diff[i * dim + c];
    }
    kernels::contrastive_backward(similar.data(), diff.data(), dist_sq.data(), pairs, dim, margin,
                                  legacy, sign / static_cast<T>(pairs), &loss_weight, dx.data(),
                                  nullptr);
    EXPECT_TRUE(close_to(dx, dx_want, 1e-3 * rtol_of<T>(), 8 * rtol_of<T>()))
        << "dx, sign " << sign;
  }
}

TEST(Losses, ContrastiveMatchesFloat64) {
  for (const bool legacy : {false, true}) {
    check_contrastive<float>(legacy);
    check_contrastive<double>(legacy);
  }
}

template <typename T>
void check_hinge(bool l2) {
  SCOPED_TRACE(cat(type_name<T>(), l2 ? ", L2" : ", L1"));
  constexpr int64_t outer = 37, classes = 10;  // 370 scores
  const std::vector<T> x = uniform<T>(outer * classes, -2, 2, 57);
  const std::vector<int64_t> labels = decoded_labels(outer, classes, 0, 58);
  std::vector<T> margins(outer * classes, T(7)), margins_want(outer * classes), loss(1);
  double sum = 0;
  for (int64_t i = 0; i < outer; ++i)
    for (int64_t k = 0; k < classes; ++k) {  // the CPU layer's
      const int64_t j = i * classes + k;
      const T s = k == labels[i] ? -x[j] : x[j];
      margins_want[j] = std::max(T(0), T(1) + s);
      sum += l2 ? static_cast<double>(margins_want[j]) * margins_want[j] : margins_want[j];
    }
  kernels::hinge_forward(x.data(), labels.data(), outer, classes, l2, margins.data(), loss.data(),
                         nullptr);
  EXPECT_TRUE(same_bits(margins, margins_want)) << "margins";
  EXPECT_TRUE(close_to(loss, {sum / outer}, 0, rtol_of<T>())) << "loss";

  const T loss_weight = T(0.75), scale = loss_weight / static_cast<T>(outer);
  std::vector<T> dx(outer * classes, T(7)), dx_want(outer * classes);
  for (int64_t i = 0; i < outer; ++i)
    for (int64_t k = 0; k < classes; ++k) {
      const int64_t j = i * classes + k;
      const T sign = k == labels[i] ? T(-1) : T(1);
      const T slope = l2 ? T(2) * margins_want[j] : T(margins_want[j] > 0);
      dx_want[j] = scale * sign * slope;
    }
  kernels::hinge_backward(margins.data(), labels.data(), outer, classes, l2, &loss_weight,
                          dx.data(), nullptr);
  EXPECT_TRUE(same_bits(dx, dx_want)) << "dx";
}

TEST(Losses, HingeMatchesTheCpuLayer) {
  for (const bool l2 : {false, true}) {
    check_hinge<float>(l2);
    check_hinge<double>(l2);
  }
}

// ---- SoftmaxWithLoss's loss and gradient (softmax_loss.cu, layers/softmax_with_loss_layer.cpp) --

template <typename T>
void check_softmax_loss(kernels::LossNormalization mode, bool all_ignored) {
  const kernels::ClassShape s{3, 7, 100};  // 300 positions, 2100 probabilities
  SCOPED_TRACE(cat(type_name<T>(), ", normalization ", static_cast<int>(mode),
                   all_ignored ? ", all ignored" : ""));
  const int64_t positions = s.outer * s.inner, n = positions * s.classes;
  // Probabilities of random logits, in float64 then T.
  const std::vector<double> logits = uniform<double>(n, -4, 4, 60);
  std::vector<T> prob(n);
  for (int64_t pos = 0; pos < positions; ++pos) {
    const int64_t base = pos / s.inner * s.classes * s.inner + pos % s.inner;
    double total = 0;
    for (int64_t c = 0; c < s.classes; ++c) total += std::exp(logits[base + c * s.inner]);
    for (int64_t c = 0; c < s.classes; ++c)
      prob[base + c * s.inner] = static_cast<T>(std::exp(logits[base + c * s.inner]) / total);
  }
  std::vector<int64_t> labels = decoded_labels(positions, s.classes, 5, 61);
  if (all_ignored) std::fill(labels.begin(), labels.end(), -1);
  const auto label_prob = [&](int64_t pos) -> T& {
    return prob[(pos / s.inner * s.classes + labels[pos]) * s.inner + pos % s.inner];
  };
  if (!all_ignored) {
    label_prob(0) = T(0);  // below FLT_MIN: -log(FLT_MIN)
    label_prob(1) = std::is_same_v<T, double> ? T(1e-300) : T(1e-40);
  }

  double sum = 0, valid = 0;
  for (int64_t pos = 0; pos < positions; ++pos) {
    if (labels[pos] < 0) continue;
    sum -= std::log(std::max<double>(label_prob(pos), FLT_MIN));
    valid += 1;
  }
  double normalizer_want = 1;
  if (mode == kernels::LossNormalization::Full) normalizer_want = static_cast<double>(positions);
  if (mode == kernels::LossNormalization::Valid) normalizer_want = valid;
  if (mode == kernels::LossNormalization::BatchSize) normalizer_want = static_cast<double>(s.outer);
  normalizer_want = std::max(normalizer_want, 1.0);
  std::vector<T> loss(1, T(-1));
  double normalizer = -1;
  kernels::softmax_loss_forward(prob.data(), labels.data(), s, mode, loss.data(), &normalizer,
                                nullptr);
  EXPECT_EQ(normalizer, normalizer_want);
  EXPECT_TRUE(close_to(loss, {sum / normalizer_want}, 0, rtol_of<T>())) << "loss";

  // The gradient: the CPU layer's expressions bit for bit, and float64's to a rounding.
  const T loss_weight = T(0.75);
  const T scale = static_cast<T>(loss_weight / normalizer_want);
  std::vector<T> dx(n, T(7)), dx_same(n);
  std::vector<double> dx_want(n);
  for (int64_t pos = 0; pos < positions; ++pos) {
    const int64_t l = labels[pos], base = pos / s.inner * s.classes * s.inner + pos % s.inner;
    for (int64_t c = 0; c < s.classes; ++c) {
      const int64_t i = base + c * s.inner;
      dx_same[i] = (l < 0 ? T(0) : prob[i] - (c == l ? T(1) : T(0))) * scale;
      dx_want[i] = l < 0 ? 0.0 : (prob[i] - (c == l ? 1.0 : 0.0)) * loss_weight / normalizer_want;
    }
  }
  kernels::softmax_loss_backward(prob.data(), labels.data(), s, &loss_weight, &normalizer,
                                 dx.data(), nullptr);
  EXPECT_TRUE(same_bits(dx, dx_same)) << "dx";
  EXPECT_TRUE(close_to(dx, dx_want, 0, 2 * rtol_of<T>())) << "dx";
}

TEST(SoftmaxLoss, LossAndGradientMatchFloat64InEveryNormalization) {
  for (const auto mode :
       {kernels::LossNormalization::Full, kernels::LossNormalization::Valid,
        kernels::LossNormalization::BatchSize, kernels::LossNormalization::None}) {
    check_softmax_loss<float>(mode, false);
    check_softmax_loss<double>(mode, false);
  }
  check_softmax_loss<float>(kernels::LossNormalization::Valid, true);  // a zero loss, not NaN
}

// ---- stochastic pooling (stochastic_pooling.cu, layers/stochastic_pooling_layer.cpp) ----

std::string describe(const kernels::StochasticPoolGeometry& g) {
  return cat(g.planes, "x", g.height, "x", g.width, "_k", g.kernel_h, "x", g.kernel_w, "_s",
             g.stride_h, "x", g.stride_w, "_to_", g.pooled_h, "x", g.pooled_w);
}

// The CPU layer's forward and backward, for planes of samples from sample_offset on.
template <typename T>
struct StochasticPoolReference {
  std::vector<T> y, chosen, dx;
};

template <typename T>
StochasticPoolReference<T> stochastic_pool_reference(const std::vector<T>& x,
                                                     const std::vector<T>& dy,
                                                     const kernels::StochasticPoolGeometry& g,
                                                     bool train, uint64_t step_key,
                                                     int64_t sample_offset) {
  const int64_t outputs = g.pooled_h * g.pooled_w;
  StochasticPoolReference<T> r{std::vector<T>(g.planes * outputs),
                               std::vector<T>(g.planes * outputs),
                               std::vector<T>(g.planes * g.height * g.width)};
  for (int64_t plane = 0; plane < g.planes; ++plane) {
    const T* in = x.data() + plane * g.height * g.width;
    const CounterRng draws(
        fold_counter(step_key, static_cast<uint64_t>(sample_offset + plane / g.channels)));
    for (int64_t o = 0; o < outputs; ++o) {
      const int64_t h0 = o / g.pooled_w * g.stride_h, w0 = o % g.pooled_w * g.stride_w;
      const int64_t h1 = std::min(h0 + g.kernel_h, g.height),
                    w1 = std::min(w0 + g.kernel_w, g.width);
      T sum = 0, squares = 0;
      for (int64_t h = h0; h < h1; ++h)
        for (int64_t w = w0; w < w1; ++w)
          sum += in[h * g.width + w], squares += in[h * g.width + w] * in[h * g.width + w];
      const int64_t out = plane * outputs + o;
      if (!train) {
        r.y[out] = sum > 0 ? squares / sum : T(0);
        r.chosen[out] = sum;
        continue;
      }
      const uint64_t position = static_cast<uint64_t>((plane % g.channels) * outputs + o);
      const T threshold = static_cast<T>(draws.uniform(position)) * sum;
      T running = 0;
      int64_t pick = h0 * g.width + w0;
      for (int64_t h = h0, done = 0; h < h1 && !done; ++h)
        for (int64_t w = w0; w < w1; ++w) {
          running += in[h * g.width + w];
          if (running >= threshold) {
            pick = h * g.width + w;
            done = 1;
            break;
          }
        }
      r.y[out] = in[pick];
      r.chosen[out] = static_cast<T>(pick);
    }
  }
  for (int64_t plane = 0; plane < g.planes; ++plane)
    for (int64_t h = 0; h < g.height; ++h)
      for (int64_t w = 0; w < g.width; ++w) {
        const int64_t ph0 = h < g.kernel_h ? 0 : (h - g.kernel_h) / g.stride_h + 1;
        const int64_t ph1 = std::min(h / g.stride_h + 1, g.pooled_h);
        const int64_t pw0 = w < g.kernel_w ? 0 : (w - g.kernel_w) / g.stride_w + 1;
        const int64_t pw1 = std::min(w / g.stride_w + 1, g.pooled_w);
        const int64_t i = (plane * g.height + h) * g.width + w;
        T sum = 0;
        for (int64_t ph = ph0; ph < ph1; ++ph)
          for (int64_t pw = pw0; pw < pw1; ++pw) {
            const int64_t o = (plane * g.pooled_h + ph) * g.pooled_w + pw;
            if (train && static_cast<int64_t>(r.chosen[o]) == h * g.width + w) sum += dy[o];
            if (!train && r.chosen[o] > 0) sum += dy[o] * (2 * x[i] - r.y[o]) / r.chosen[o];
          }
        r.dx[i] = sum;
      }
  return r;
}

template <typename T>
void check_stochastic_pooling(const kernels::StochasticPoolGeometry& g, bool train) {
  SCOPED_TRACE(cat(type_name<T>(), " ", describe(g), train ? ", train" : ", test"));
  const int64_t outputs = g.planes * g.pooled_h * g.pooled_w,
                inputs = g.planes * g.height * g.width;
  // Inputs >= 0 (after a ReLU), in steps of 1/64: exact squares. A window of zeros (plane 0's
  // first): sum 0, so the first input is taken (train) and y is 0 (test).
  std::vector<T> x = stepped<T>(inputs, 0, 4, 6, 62);
  for (int64_t h = 0; h < g.kernel_h; ++h)
    for (int64_t w = 0; w < g.kernel_w; ++w) x[h * g.width + w] = T(0);
  const std::vector<T> dy = uniform<T>(outputs, -1, 1, 63);
  const uint64_t step_key = CounterRng({uint64_t{42}, hash_name("pool3"), uint64_t{77}}).key();
  constexpr int64_t kSampleOffset = 4;
  const StochasticPoolReference<T> want =
      stochastic_pool_reference(x, dy, g, train, step_key, kSampleOffset);
  std::vector<T> y(outputs, T(7)), chosen(outputs, T(7)), dx(inputs, T(7));
  kernels::stochastic_pool_forward(x.data(), g, train, step_key, kSampleOffset, y.data(),
                                   chosen.data(), nullptr);
  kernels::stochastic_pool_backward(x.data(), y.data(), dy.data(), chosen.data(), g, train,
                                    dx.data(), nullptr);
  EXPECT_TRUE(same_bits(y, want.y)) << "y";
  EXPECT_TRUE(same_bits(chosen, want.chosen)) << (train ? "the inputs taken" : "window sums");
  EXPECT_TRUE(same_bits(dx, want.dx)) << "dx";
  if (!train) return;

  // A worker holding the last sample alone, at its offset, takes the same inputs.
  kernels::StochasticPoolGeometry last = g;
  last.planes = g.channels;
  const int64_t per_sample = g.channels * g.pooled_h * g.pooled_w;
  std::vector<T> y_last(per_sample), chosen_last(per_sample);
  kernels::stochastic_pool_forward(x.data() + inputs - g.channels * g.height * g.width, last, train,
                                   step_key, kSampleOffset + g.planes / g.channels - 1,
                                   y_last.data(), chosen_last.data(), nullptr);
  EXPECT_TRUE(same_bits(chosen_last, std::vector<T>(chosen.end() - per_sample, chosen.end())))
      << "the last sample's, alone";
}

TEST(StochasticPooling, DrawsAndGradientsAreTheCpuLayersBitForBit) {
  // {planes, channels, height, width, pooled_h, pooled_w, kernel_h, kernel_w, stride_h, stride_w}
  // 4 samples of 3 channels, 10x10 by 3x3 windows of stride 2, rounded up (the last window
  // clipped): 300 outputs, 1200 inputs. 2 samples of 2 channels, 7x10 by 2x3 windows of strides
  // 1 and 2 (overlapping rows, the last column in no window): 96 outputs, 280 inputs.
  for (const kernels::StochasticPoolGeometry& g :
       {kernels::StochasticPoolGeometry{12, 3, 10, 10, 5, 5, 3, 3, 2, 2},
        kernels::StochasticPoolGeometry{4, 2, 7, 10, 6, 4, 2, 3, 1, 2}})
    for (const bool train : {true, false}) {
      check_stochastic_pooling<float>(g, train);
      check_stochastic_pooling<double>(g, train);
    }
}

}  // namespace
}  // namespace cgdp
