// Convolution, Pooling, InnerProduct and LRN: forward against naive float64 loops, backward by
// finite differences, Caffe's output shapes, and the errors for bad configurations.
#include <gmock/gmock.h>
#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "cgdp/device/cpu_device.hpp"
#include "cgdp/device/layer_precision.hpp"
#include "cgdp/layers/convolution_layer.hpp"
#include "cgdp/layers/lrn_column.hpp"
#include "cgdp/layers/registry.hpp"
#include "cgdp/layers/sufficient_factors.hpp"
#ifdef CGDP_HAVE_ONEDNN
#include "layers/onednn_convolution.hpp"
#endif
#include "support/gradient_checker.hpp"

namespace cgdp {
namespace {

using testing::check_gradients;
using testing::fill_uniform;

proto::LayerParameter parse(const std::string& text) {
  proto::LayerParameter param;
  if (!google::protobuf::TextFormat::ParseFromString(text, &param))
    throw std::runtime_error("bad test layer text: " + text);
  return param;
}

// One layer with one bottom and one top, set up on the CPU.
template <typename T>
struct Harness {
  Blob<T> bottom{default_cpu_device()};
  Blob<T> top{default_cpu_device()};
  std::unique_ptr<Layer<T>> layer;

  Harness(const std::string& text, const Shape& shape, uint64_t seed = 1) {
    bottom.reshape(shape);
    fill_uniform(bottom, -1, 1, seed);
    layer = create_layer<T>(parse(text), default_cpu_device());
    Rng rng(seed + 100);
    layer->setup({&bottom}, {&top}, rng);
  }
  void forward() { layer->forward({}, {&bottom}, {&top}); }
  std::vector<double> param(int i) const {
    auto s = layer->params()[i]->data_span();
    return {s.begin(), s.end()};
  }
  std::vector<double> input() const { return {bottom.data(), bottom.data() + bottom.count()}; }
};

// max |a - ref| / max |ref|: the error relative to the output's scale; infinite where a value is
// NaN (std::max would pass over it).
template <typename T>
double relative_error(const Blob<T>& actual, const std::vector<double>& ref) {
  EXPECT_EQ(static_cast<size_t>(actual.count()), ref.size());
  double diff = 0, scale = 1e-30;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double error = std::abs(static_cast<double>(actual.data()[i]) - ref[i]);
    if (std::isnan(error)) return std::numeric_limits<double>::infinity();
    diff = std::max(diff, error);
    scale = std::max(scale, std::abs(ref[i]));
  }
  return diff / scale;
}

template <typename T>
double tolerance() {
  return std::is_same_v<T, float> ? 1e-5 : 1e-12;
}

// ---- naive float64 references ----

struct ConvConfig {
  int64_t num_output, kh, kw, ph = 0, pw = 0, sh = 1, sw = 1, dh = 1, dw = 1, group = 1;
  bool bias = true;
  std::string engine = "DEFAULT";  // float on the CPU: oneDNN when built with it; CAFFE: GEMM

  std::string text() const {
    return cat("name: 'conv' type: 'Convolution' convolution_param { engine: ", engine,
               " num_output: ", num_output,
               " kernel_h: ", kh, " kernel_w: ", kw, " pad_h: ", ph, " pad_w: ", pw,
               " stride_h: ", sh, " stride_w: ", sw, " dilation: ", dh, " dilation: ", dw,
               " group: ", group, " bias_term: ", bias ? "true" : "false",
               " weight_filler { type: 'gaussian' std: 0.5 }",
               " bias_filler { type: 'uniform' min: -1 max: 1 } }");
  }
};

std::vector<double> conv_reference(const std::vector<double>& x, const Shape& s,
                                   const std::vector<double>& w, const std::vector<double>& b,
                                   const ConvConfig& c) {
  const int64_t n_img = s[0], ch = s[1], h = s[2], wd = s[3];
  const int64_t oh = (h + 2 * c.ph - (c.dh * (c.kh - 1) + 1)) / c.sh + 1;
  const int64_t ow = (wd + 2 * c.pw - (c.dw * (c.kw - 1) + 1)) / c.sw + 1;
  const int64_t cg = ch / c.group, og = c.num_output / c.group;
  std::vector<double> y(n_img * c.num_output * oh * ow);
  for (int64_t n = 0; n < n_img; ++n)
    for (int64_t o = 0; o < c.num_output; ++o)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          double sum = c.bias ? b[o] : 0;
          for (int64_t ci = 0; ci < cg; ++ci)
            for (int64_t u = 0; u < c.kh; ++u)
              for (int64_t v = 0; v < c.kw; ++v) {
                const int64_t y0 = i * c.sh - c.ph + u * c.dh, x0 = j * c.sw - c.pw + v * c.dw;
                if (y0 < 0 || y0 >= h || x0 < 0 || x0 >= wd) continue;
                const int64_t in_c = (o / og) * cg + ci;
                sum += w[((o * cg + ci) * c.kh + u) * c.kw + v] *
                       x[((n * ch + in_c) * h + y0) * wd + x0];
              }
          y[((n * c.num_output + o) * oh + i) * ow + j] = sum;
        }
  return y;
}

// Caffe's pooling, written out plainly; out_h/out_w are taken from the layer's top.
std::vector<double> pool_reference(const std::vector<double>& x, const Shape& s, bool max,
                                   int64_t k, int64_t p, int64_t st, int64_t out_h, int64_t out_w) {
  const int64_t h = s[2], w = s[3];
  std::vector<double> y;
  for (int64_t plane = 0; plane < s[0] * s[1]; ++plane)
    for (int64_t i = 0; i < out_h; ++i)
      for (int64_t j = 0; j < out_w; ++j) {
        const int64_t y0 = i * st - p, x0 = j * st - p;
        const int64_t y1 = std::min(y0 + k, h + p), x1 = std::min(x0 + k, w + p);
        double best = -1e300, sum = 0;
        for (int64_t u = std::max<int64_t>(y0, 0); u < std::min(y1, h); ++u)
          for (int64_t v = std::max<int64_t>(x0, 0); v < std::min(x1, w); ++v) {
            best = std::max(best, x[(plane * h + u) * w + v]);
            sum += x[(plane * h + u) * w + v];
          }
        y.push_back(max ? best : sum / static_cast<double>((y1 - y0) * (x1 - x0)));
      }
  return y;
}

// Caffe's LRN: ACROSS_CHANNELS, or WITHIN_CHANNEL as Split + Square + AVE pool + Power + Product.
std::vector<double> lrn_reference(const std::vector<double>& x, const Shape& s, bool across,
                                  int64_t size, double alpha, double beta, double k) {
  const int64_t ch = s[1], h = s[2], w = s[3], half = size / 2;
  auto at = [&](int64_t n, int64_t c, int64_t i, int64_t j) {
    return ((n * ch + c) * h + i) * w + j;
  };
  std::vector<double> y(x.size());
  for (int64_t n = 0; n < s[0]; ++n)
    for (int64_t c = 0; c < ch; ++c)
      for (int64_t i = 0; i < h; ++i)
        for (int64_t j = 0; j < w; ++j) {
          double sq = 0;
          if (across) {
            for (int64_t d = c - half; d <= c + half; ++d)
              if (d >= 0 && d < ch) sq += x[at(n, d, i, j)] * x[at(n, d, i, j)];
          } else {
            for (int64_t u = i - half; u <= i + half; ++u)
              for (int64_t v = j - half; v <= j + half; ++v)
                if (u >= 0 && u < h && v >= 0 && v < w) sq += x[at(n, c, u, v)] * x[at(n, c, u, v)];
          }
          const double scale = across ? k + alpha / size * sq : 1 + alpha / (size * size) * sq;
          y[at(n, c, i, j)] = x[at(n, c, i, j)] * std::pow(scale, -beta);
        }
  return y;
}

template <typename T>
class SpatialForward : public ::testing::Test {};
using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(SpatialForward, Precisions);

// ---- Convolution ----

const std::vector<std::pair<ConvConfig, Shape>>& conv_cases() {
  static const std::vector<std::pair<ConvConfig, Shape>> cases = {
      {{4, 3, 3, 1, 1}, {3, 3, 6, 5}},                        // pad 1, three images (uneven split)
      {{3, 3, 2, 0, 0, 2, 2, 1, 1, 1, false}, {2, 2, 7, 8}},  // rectangular, stride 2, no bias
      {{6, 3, 3, 1, 1, 1, 1, 1, 1, 2}, {2, 4, 5, 5}},         // group 2
      {{2, 3, 3, 2, 2, 1, 1, 2, 2}, {1, 2, 7, 7}},            // dilation 2, one image (serial path)
      {{5, 1, 1}, {2, 3, 4, 4}},                              // pointwise: no im2col
      {{4, 2, 3, 1, 0, 3, 2, 2, 1, 2}, {2, 4, 9, 8}},         // everything at once
      // Rows of 8 or more outputs: im2col/col2im's vector paths and their overlapping last
      // vector.
      {{2, 5, 5, 2, 2}, {2, 1, 4, 19}},                 // stride 1, out_w 19 = 8 + 8 + 3
      {{4, 3, 3, 1, 1, 2, 2, 1, 1, 2}, {2, 2, 3, 30}},  // stride 2, pad 1, groups, out_w 15
  };
  return cases;
}

// The engines a float convolution runs on here: oneDNN (when built with it) and im2col + GEMM.
std::vector<std::string> float_engines() {
#ifdef CGDP_HAVE_ONEDNN
  return {"DEFAULT", "CAFFE"};
#else
  return {"CAFFE"};
#endif
}

// Every convolution case on every engine (double has only im2col + GEMM). oneDNN takes layers
// with 8 or more input channels per group, so its cases get that many.
template <typename T>
std::vector<std::pair<ConvConfig, Shape>> engine_cases(
    std::vector<std::pair<ConvConfig, Shape>> cases) {
  std::vector<std::pair<ConvConfig, Shape>> all;
  for (const std::string& engine : std::is_same_v<T, float> ? float_engines()
                                                            : std::vector<std::string>{"CAFFE"})
    for (auto [config, shape] : cases) {
      config.engine = engine;
      if (engine == "DEFAULT") shape[1] = std::max<int64_t>(shape[1], 8 * config.group);
      all.push_back({config, shape});
    }
  return all;
}

// Asserts the layer runs on the engine its text asks for, so that no engine goes untested.
template <typename T>
void expect_engine(const Layer<T>& layer, const ConvConfig& config) {
  const bool onednn = std::is_same_v<T, float> && config.engine == "DEFAULT" &&
                      float_engines().size() == 2;
  EXPECT_EQ(dynamic_cast<const ConvolutionLayer<T>&>(layer).uses_onednn(), onednn);
}

#ifdef CGDP_HAVE_ONEDNN
TEST(Convolution, FewInputChannelsStayOnGemm) {
  ConvConfig config{4, 3, 3, 1, 1};
  Harness<float> first_layer(config.text(), {2, 3, 6, 6});
  EXPECT_FALSE(dynamic_cast<const ConvolutionLayer<float>&>(*first_layer.layer).uses_onednn());
  Harness<float> deeper(config.text(), {2, 8, 6, 6});
  EXPECT_TRUE(dynamic_cast<const ConvolutionLayer<float>&>(*deeper.layer).uses_onednn());
}
#endif

#ifdef CGDP_HAVE_ONEDNN
// A bf16 convolution against its fp32 twin, element by element. Rounding both factors of a
// product to bfloat16 (u = 2^-8) moves it by at most (2u + u^2)|a b|, so each output may differ
// by that times the sum of |a b| over its reduction (the fp32 convolution of |a| and |b|), plus
// fp32's own summation error (K 2^-24 of the same). The bound is tight enough that an fp32 run
// of the bf16 one, or a wrong layout, would show, and the test also asks that bf16 changed
// something.
struct Bf16Case {
  const char* name;
  int64_t batch, channels, size, num_output, kernel, pad, stride, group;
};

std::vector<float> uniform_values(size_t count, unsigned seed) {
  std::vector<float> v(count);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (float& x : v) x = dist(rng);
  return v;
}
std::vector<float> absolute(std::vector<float> v) {
  for (float& x : v) x = std::abs(x);
  return v;
}

// Forward, data and weight gradients of a convolution, through OneDnnConvolution.
struct ConvRun {
  std::vector<float> out, in_diff, weight_diff, bias_diff;
};
ConvRun run_conv(const OneDnnShape& shape, const std::vector<float>& in,
                 const std::vector<float>& weight, const std::vector<float>& bias,
                 const std::vector<float>& out_diff) {
  auto conv = OneDnnConvolution::create(shape);
  EXPECT_NE(conv, nullptr);
  ConvRun r{std::vector<float>(out_diff.size()), std::vector<float>(in.size()),
            std::vector<float>(weight.size(), 0.f), std::vector<float>(bias.size(), 0.f)};
  if (!conv) return r;
  conv->forward(in.data(), weight.data(), bias.data(), r.out.data());
  std::vector<float> diff = out_diff;  // backward may zero it in place (an absorbed ReLU)
  conv->backward(in.data(), weight.data(), r.out.data(), diff.data(), r.weight_diff.data(),
                 r.bias_diff.data(), r.in_diff.data());
  return r;
}

TEST(Convolution, Bf16MatchesItsFp32TwinWithinBfloat16Rounding) {
  if (!cpu_has_bf16())  // where it has them, a missing bf16 primitive fails in run_conv
    GTEST_SKIP() << "this CPU has no AVX512_BF16 instructions: oneDNN has no bf16 convolution "
                    "for it (--precision bf16 is refused here)";
  const Bf16Case cases[] = {{"b2_c16_s9_o8_k3_p1", 2, 16, 9, 8, 3, 1, 1, 1},
                            {"b3_c32_s11_o24_k5_p2_s2_g2", 3, 32, 11, 24, 5, 2, 2, 2}};
  for (const Bf16Case& c : cases) {
    SCOPED_TRACE(c.name);
    OneDnnShape shape;
    shape.batch = c.batch;
    shape.geometry = ConvGeometry{c.channels, c.size,   c.size,   c.kernel, c.kernel, c.pad,
                                  c.pad,      c.stride, c.stride, 1,        1};
    shape.num_output = c.num_output;
    shape.group = c.group;
    const int64_t out_size = shape.geometry.out_h() * shape.geometry.out_w();
    const auto in = uniform_values(c.batch * c.channels * c.size * c.size, 1);
    const auto weight =
        uniform_values(c.num_output * c.channels / c.group * c.kernel * c.kernel, 2);
    const auto bias = uniform_values(c.num_output, 3);
    const auto out_diff = uniform_values(c.batch * c.num_output * out_size, 4);
    const ConvRun fp32 = run_conv(shape, in, weight, bias, out_diff);
    const ConvRun sums =
        run_conv(shape, absolute(in), absolute(weight), absolute(bias), absolute(out_diff));
    shape.bf16 = true;
    const ConvRun bf16 = run_conv(shape, in, weight, bias, out_diff);
    const double u = std::ldexp(1.0, -8);
    const int64_t longest =
        std::max({c.channels / c.group * c.kernel * c.kernel,
                  c.num_output / c.group * c.kernel * c.kernel, c.batch * out_size});
    const double rate = 2 * u + u * u + static_cast<double>(longest) * std::ldexp(1.0, -24);
    auto expect_within = [&](const std::vector<float>& want, const std::vector<float>& got,
                             const std::vector<float>& abs_sum, const char* what) {
      double changed = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        const double error = std::abs(static_cast<double>(got[i]) - want[i]);
        ASSERT_LE(error, rate * abs_sum[i] + 1e-6) << what << " element " << i;
        changed = std::max(changed, error);
      }
      EXPECT_GT(changed, 0) << what << ": bf16 rounded nothing";
    };
    expect_within(fp32.out, bf16.out, sums.out, "forward");
    expect_within(fp32.in_diff, bf16.in_diff, sums.in_diff, "data gradient");
    expect_within(fp32.weight_diff, bf16.weight_diff, sums.weight_diff, "weight gradient");
    expect_within(fp32.bias_diff, bf16.bias_diff, sums.bias_diff, "bias gradient");
  }
}
#endif

TYPED_TEST(SpatialForward, ConvolutionMatchesDirectLoops) {
  for (const auto& [config, shape] : engine_cases<TypeParam>(conv_cases())) {
    Harness<TypeParam> h(config.text(), shape);
    expect_engine(*h.layer, config);
    h.forward();
    const auto ref = conv_reference(h.input(), shape, h.param(0),
                                    config.bias ? h.param(1) : std::vector<double>{}, config);
    EXPECT_LT(relative_error(h.top, ref), tolerance<TypeParam>()) << config.text();
  }
}

TEST(Convolution, GradientsMatchFiniteDifferences) {
  for (const auto& [config, shape] : conv_cases()) {
    SCOPED_TRACE(config.text() + " on " + shape_string(shape));
    Harness<double> h(config.text(), shape);
    // Convolution is linear in its input and weights, so a long step adds no truncation error
    // and keeps the objective's rounding (it sums every output) far below the tolerance.
    testing::GradientCheckOptions options;
    options.step = 1e-3;
    check_gradients(*h.layer, {&h.bottom}, {&h.top}, options);
  }
}

// Case 0 folds its bias into the GEMMs (one group), case 2 (two groups) sums it separately;
// float adds oneDNN's gradients to what is there.
template <typename T>
void expect_gradients_accumulate(const std::vector<std::pair<ConvConfig, Shape>>& cases) {
  for (const auto& [config, shape] : cases) {
    SCOPED_TRACE(config.text());
    Harness<T> h(config.text(), shape);
    expect_engine(*h.layer, config);
    h.forward();
    fill_uniform(h.top, -1, 1, 3);
    std::copy(h.top.data(), h.top.data() + h.top.count(), h.top.mutable_diff());
    for (auto& p : h.layer->params())
      std::fill(p->mutable_diff(), p->mutable_diff() + p->count(), 0);
    h.layer->backward({}, {&h.top}, {true}, {&h.bottom});
    std::vector<std::vector<double>> once;
    for (auto& p : h.layer->params()) once.emplace_back(p->diff(), p->diff() + p->count());
    ASSERT_GT(std::abs(once[0][0]), 0) << "a zero gradient would accumulate to itself";
    h.layer->backward({}, {&h.top}, {false}, {&h.bottom});
    ASSERT_EQ(once.size(), 2u);  // weights and bias
    const double tolerance = std::is_same_v<T, float> ? 1e-6 : 1e-12;
    for (size_t i = 0; i < once.size(); ++i)
      for (size_t j = 0; j < once[i].size(); ++j)
        EXPECT_NEAR(h.layer->params()[i]->diff()[j], 2 * once[i][j], tolerance);
  }
}

TEST(Convolution, ParameterGradientsAccumulate) {
  expect_gradients_accumulate<double>({conv_cases()[0], conv_cases()[2]});
  expect_gradients_accumulate<float>(engine_cases<float>({conv_cases()[0], conv_cases()[2]}));
}

// Float's vectors are 8 wide, double's 4, so their tails differ, and float may run on oneDNN:
// float forward and backward on each engine against the double layer, itself checked against
// direct loops and finite differences above.
TEST(Convolution, FloatEnginesMatchTheDoubleLayer) {
  std::vector<std::pair<ConvConfig, Shape>> cases = conv_cases();
  cases.push_back({{2, 11, 11, 0, 0, 4, 4}, {1, 2, 15, 47}});  // AlexNet's conv1 kernel, out_w 10
  cases.push_back({{16, 5, 5, 2, 2}, {4, 8, 14, 14}});        // fashion_cnn's conv2, smaller
  for (const auto& [config, shape] : engine_cases<float>(cases)) {
    SCOPED_TRACE(config.text() + " on " + shape_string(shape));
    ConvConfig reference = config;
    reference.engine = "CAFFE";
    Harness<double> wide(reference.text(), shape);
    Harness<float> narrow(config.text(), shape);
    expect_engine(*narrow.layer, config);
    std::copy(wide.bottom.data(), wide.bottom.data() + wide.bottom.count(),
              narrow.bottom.mutable_data());
    for (size_t i = 0; i < wide.layer->params().size(); ++i) {
      const auto& from = *wide.layer->params()[i];
      std::copy(from.data(), from.data() + from.count(), narrow.layer->params()[i]->mutable_data());
    }
    wide.forward();
    narrow.forward();
    const std::vector<double> top(wide.top.data(), wide.top.data() + wide.top.count());
    EXPECT_LT(relative_error(narrow.top, top), 1e-5);
    fill_uniform(wide.top, -1, 1, 9);
    for (int64_t i = 0; i < wide.top.count(); ++i) {
      wide.top.mutable_diff()[i] = wide.top.data()[i];
      narrow.top.mutable_diff()[i] = static_cast<float>(wide.top.data()[i]);
    }
    wide.layer->backward({}, {&wide.top}, {true}, {&wide.bottom});
    narrow.layer->backward({}, {&narrow.top}, {true}, {&narrow.bottom});
    auto diffs = [](const auto& blob) {
      return std::vector<double>(blob.diff(), blob.diff() + blob.count());
    };
    auto error = [](const std::vector<double>& actual, const std::vector<double>& ref) {
      double diff = 0, scale = 1e-30;
      for (size_t i = 0; i < ref.size(); ++i)
        diff = std::max(diff, std::abs(actual[i] - ref[i])),
        scale = std::max(scale, std::abs(ref[i]));
      return diff / scale;
    };
    EXPECT_LT(error(diffs(narrow.bottom), diffs(wide.bottom)), 1e-5) << "bottom";
    for (size_t i = 0; i < wide.layer->params().size(); ++i)
      EXPECT_LT(error(diffs(*narrow.layer->params()[i]), diffs(*wide.layer->params()[i])), 1e-5)
          << "param " << i;
  }
}

TEST(Convolution, OutputShapesFollowCaffe) {
  const std::string alexnet_conv1 =
      "name: 'conv1' type: 'Convolution' convolution_param { num_output: 2 kernel_size: 11 "
      "stride: 4 }";
  Harness<float> conv1(alexnet_conv1, {1, 3, 227, 227});
  EXPECT_EQ(conv1.top.shape(), (Shape{1, 2, 55, 55}));
  Harness<float> conv2(
      "name: 'conv2' type: 'Convolution' convolution_param { num_output: 4 kernel_size: 5 pad: 2 "
      "group: 2 }",
      {2, 6, 27, 27});
  EXPECT_EQ(conv2.top.shape(), (Shape{2, 4, 27, 27}));
  EXPECT_EQ(conv2.layer->params()[0]->shape(), (Shape{4, 3, 5, 5}));
  EXPECT_EQ(conv2.layer->params()[1]->shape(), (Shape{4}));
  Harness<float> dilated(
      "name: 'd' type: 'Convolution' convolution_param { num_output: 1 kernel_size: 3 "
      "dilation: 2 stride: 2 bias_term: false }",
      {1, 1, 10, 9});
  EXPECT_EQ(dilated.top.shape(), (Shape{1, 1, 3, 3}));  // extent 5: (10-5)/2+1, (9-5)/2+1
  EXPECT_EQ(dilated.layer->params().size(), 1u);
}

// ---- Pooling ----

struct PoolCase {
  std::string text;
  Shape shape;
  bool max;
  int64_t k, p, s;
};

const std::vector<PoolCase>& pool_cases() {
  static const std::vector<PoolCase> cases = {
      {"pool: MAX kernel_size: 2 stride: 2", {2, 3, 6, 6}, true, 2, 0, 2},
      {"pool: MAX kernel_size: 3 stride: 2", {2, 2, 6, 7}, true, 3, 0, 2},  // rounds up
      {"pool: MAX kernel_size: 3 stride: 2 pad: 1", {1, 2, 5, 4}, true, 3, 1, 2},
      {"pool: AVE kernel_size: 3 stride: 2", {2, 2, 6, 7}, false, 3, 0, 2},
      {"pool: AVE kernel_size: 3 stride: 2 pad: 1", {1, 2, 4, 5}, false, 3, 1, 2},
      {"pool: AVE kernel_size: 3 stride: 1 pad: 1", {1, 1, 3, 3}, false, 3, 1, 1},
  };
  return cases;
}

std::string pool_text(const std::string& body) {
  return "name: 'pool' type: 'Pooling' pooling_param { " + body + " }";
}

TYPED_TEST(SpatialForward, PoolingMatchesNaiveLoops) {
  for (const PoolCase& c : pool_cases()) {
    Harness<TypeParam> h(pool_text(c.text), c.shape);
    h.forward();
    const auto ref =
        pool_reference(h.input(), c.shape, c.max, c.k, c.p, c.s, h.top.shape(2), h.top.shape(3));
    EXPECT_LT(relative_error(h.top, ref), tolerance<TypeParam>()) << c.text;
  }
}

TYPED_TEST(SpatialForward, GlobalPoolingReducesEachPlane) {
  for (const bool max : {true, false}) {
    Harness<TypeParam> h(
        pool_text(max ? "pool: MAX global_pooling: true" : "pool: AVE global_pooling: true"),
        {2, 3, 4, 5});
    h.forward();
    EXPECT_EQ(h.top.shape(), (Shape{2, 3, 1, 1}));
    const std::vector<double> x = h.input();
    std::vector<double> direct;
    for (int64_t p = 0; p < 6; ++p) {
      const auto first = x.begin() + p * 20;
      direct.push_back(max ? *std::max_element(first, first + 20)
                           : std::accumulate(first, first + 20, 0.0) / 20);
    }
    EXPECT_LT(relative_error(h.top, direct), tolerance<TypeParam>());
  }
}

// Distinct, well separated values: finite differences then never move a maximum.
void fill_distinct(Blob<double>& blob, uint64_t seed) {
  std::vector<double> values(blob.count());
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.01 * static_cast<double>(i) - 1;
  std::shuffle(values.begin(), values.end(), std::mt19937_64(seed));
  std::copy(values.begin(), values.end(), blob.mutable_data());
}

TEST(Pooling, GradientsMatchFiniteDifferences) {
  std::vector<std::pair<std::string, Shape>> cases;
  for (const PoolCase& c : pool_cases()) cases.emplace_back(c.text, c.shape);
  cases.emplace_back("pool: MAX global_pooling: true", Shape{2, 2, 3, 4});
  // 272 places in the window: two bytes per output's argmax (pool_window_code.hpp).
  cases.emplace_back("pool: MAX global_pooling: true", Shape{1, 2, 17, 16});
  cases.emplace_back("pool: AVE global_pooling: true", Shape{2, 2, 3, 4});
  cases.emplace_back("pool: AVE kernel_h: 2 kernel_w: 3 stride_h: 1 stride_w: 2",
                     Shape{1, 2, 4, 7});
  for (const auto& [text, shape] : cases) {
    SCOPED_TRACE(text);
    Harness<double> h(pool_text(text), shape);
    fill_distinct(h.bottom, 5);
    check_gradients(*h.layer, {&h.bottom}, {&h.top});
  }
}

// MAX keeps each output's argmax as its place in the window: a byte each for Caffe's windows,
// two past 254 places, four past 65,534; a window with nothing above -max (all -inf) routes no
// gradient.
TEST(Pooling, KeepsItsArgmaxInAByteOrTwoAndRoutesNoGradientFromAnEmptyWindow) {
  const auto kept_bytes = [](const std::string& body, const Shape& shape) {
    Harness<float> h(pool_text(body), shape);
    return std::pair(static_cast<int64_t>(h.layer->kept_indices()->bytes()), h.top.count());
  };
  const auto [small, outputs] = kept_bytes("pool: MAX kernel_size: 3 stride: 2", {2, 3, 9, 9});
  EXPECT_EQ(small, outputs);
  const auto [global, planes] = kept_bytes("pool: MAX global_pooling: true", {2, 3, 17, 16});
  EXPECT_EQ(global, 2 * planes);
  EXPECT_EQ(kept_bytes("pool: MAX global_pooling: true", {1, 1, 256, 256}).first, 4);
  Harness<float> h(pool_text("pool: MAX kernel_size: 2 stride: 2"), {1, 1, 4, 4});
  float* x = h.bottom.mutable_data();
  std::fill(x, x + 16, 1.f);
  for (const int i : {0, 1, 4, 5}) x[i] = -std::numeric_limits<float>::infinity();
  h.forward();
  std::fill(h.top.mutable_diff(), h.top.mutable_diff() + 4, 1.f);
  h.layer->backward({}, {&h.top}, {true}, {&h.bottom});
  EXPECT_EQ(h.top.data()[0], -std::numeric_limits<float>::max());
  for (const int i : {0, 1, 4, 5}) EXPECT_EQ(h.bottom.diff()[i], 0.f) << i;
  EXPECT_EQ(std::accumulate(h.bottom.diff(), h.bottom.diff() + 16, 0.f), 3.f);
}

// A MAX pooling's forward and backward on small integer inputs full of ties, against a
// window-by-window reference: only the first maximum in the window's row-major order may win and
// get the gradient.
struct MaxWindow {
  int64_t kh, kw, sh, sw, ph, pw;
};

void expect_first_maximum_wins(const MaxWindow& m, const Shape& shape) {
  const std::string body =
      cat("pool: MAX kernel_h: ", m.kh, " kernel_w: ", m.kw, " stride_h: ", m.sh,
          " stride_w: ", m.sw, " pad_h: ", m.ph, " pad_w: ", m.pw);
  SCOPED_TRACE(body + " " + ::testing::PrintToString(shape));
  Harness<float> h(pool_text(body), shape);
  std::mt19937 rng(5);
  float* x = h.bottom.mutable_data();
  for (int64_t i = 0; i < h.bottom.count(); ++i) x[i] = static_cast<float>(rng() % 4) - 2.f;
  h.forward();
  const int64_t height = shape[2], width = shape[3];
  const int64_t pooled_h = h.top.shape(2), pooled_w = h.top.shape(3);
  std::vector<float> expected_diff(h.bottom.count(), 0.f);
  float* top_diff = h.top.mutable_diff();
  for (int64_t plane = 0; plane < shape[0] * shape[1]; ++plane)
    for (int64_t oh = 0; oh < pooled_h; ++oh)
      for (int64_t ow = 0; ow < pooled_w; ++ow) {
        const int64_t h0 = oh * m.sh - m.ph, w0 = ow * m.sw - m.pw;
        int64_t first_max = -1;
        for (int64_t y = std::max<int64_t>(h0, 0); y < std::min(h0 + m.kh, height); ++y)
          for (int64_t col = std::max<int64_t>(w0, 0); col < std::min(w0 + m.kw, width); ++col) {
            const int64_t at = (plane * height + y) * width + col;
            if (first_max < 0 || x[at] > x[first_max]) first_max = at;
          }
        ASSERT_GE(first_max, 0);
        const int64_t out = (plane * pooled_h + oh) * pooled_w + ow;
        ASSERT_EQ(h.top.data()[out], x[first_max]) << "output " << out;
        top_diff[out] = static_cast<float>(out + 1);
        expected_diff[first_max] += top_diff[out];
      }
  h.layer->backward({}, {&h.top}, {true}, {&h.bottom});
  for (int64_t i = 0; i < h.bottom.count(); ++i)
    ASSERT_EQ(h.bottom.diff()[i], expected_diff[i]) << "input " << i;
}

// The vectorised 2x2/stride-2 MAX path (float, rows at least 4 outputs wide): widths that take
// 4- and 8-lane runs with an overlapping last run, and odd sizes that add clipped windows.
TEST(Pooling, VectorisedMax2x2MatchesWindowByWindowAndRoutesGradientToTheFirstMaximum) {
  for (const Shape& shape : {Shape{2, 3, 28, 28}, Shape{1, 2, 14, 14}, Shape{1, 2, 17, 15},
                             Shape{1, 1, 9, 21}, Shape{1, 1, 8, 8}})
    expect_first_maximum_wins({2, 2, 2, 2, 0, 0}, shape);
}

// The vectorised MAX path for any window at stride 1 or 2 along rows (float, at least 8 outputs
// per row whose windows need no clipping): padded and unpadded, square and not, rows whose runs
// overlap at their end, and clipped windows around them.
TEST(Pooling, VectorisedMaxOfAnyWindowMatchesWindowByWindowAndRoutesGradientToTheFirstMaximum) {
  const std::vector<std::pair<MaxWindow, Shape>> cases = {
      {{3, 3, 2, 2, 0, 0}, {2, 3, 28, 28}}, {{3, 3, 2, 2, 1, 1}, {1, 2, 23, 21}},
      {{3, 3, 1, 1, 1, 1}, {1, 2, 14, 14}}, {{3, 3, 1, 1, 0, 0}, {1, 1, 7, 19}},
      {{5, 5, 1, 1, 2, 2}, {1, 1, 11, 12}}, {{2, 3, 1, 2, 0, 1}, {1, 2, 9, 33}},
      {{3, 2, 2, 1, 1, 0}, {1, 1, 10, 17}}};
  for (const auto& [window, shape] : cases) expect_first_maximum_wins(window, shape);
}

TEST(Pooling, OutputShapesFollowCaffe) {
  auto shape_of = [](const std::string& body, const Shape& in) {
    Harness<float> h(pool_text(body), in);
    return h.top.shape();
  };
  // AlexNet pool1: 55 -> 27.
  EXPECT_EQ(shape_of("pool: MAX kernel_size: 3 stride: 2", {1, 96, 55, 55}),
            (Shape{1, 96, 27, 27}));
  // Rounding up: (6 - 3) / 2 = 1.5 -> 2 windows after the first; GoogLeNet's 112 -> 56.
  EXPECT_EQ(shape_of("pool: MAX kernel_size: 3 stride: 2", {1, 1, 6, 6}), (Shape{1, 1, 3, 3}));
  EXPECT_EQ(shape_of("pool: MAX kernel_size: 3 stride: 2", {1, 1, 112, 112}),
            (Shape{1, 1, 56, 56}));
  // With padding, a last window that would start in the padding is dropped: 3 -> 2, not 3.
  EXPECT_EQ(shape_of("pool: AVE kernel_size: 2 stride: 2 pad: 1", {1, 1, 3, 3}),
            (Shape{1, 1, 2, 2}));
  EXPECT_EQ(shape_of("pool: MAX kernel_h: 3 kernel_w: 2 stride_h: 2 stride_w: 1", {2, 1, 7, 5}),
            (Shape{2, 1, 3, 4}));
  // round_mode FLOOR: (6 - 3) / 2 = 1.5 -> 1 window after the first.
  EXPECT_EQ(shape_of("pool: MAX kernel_size: 3 stride: 2 round_mode: FLOOR", {1, 1, 6, 6}), (Shape{1, 1, 2, 2}));
  EXPECT_EQ(shape_of("pool: AVE kernel_size: 3 stride: 2 round_mode: FLOOR", {1, 1, 7, 7}), (Shape{1, 1, 3, 3}));
}

TEST(Pooling, FloorRoundingGradientsMatchFiniteDifferences) {
  for (const char* pool : {"MAX", "AVE"}) {
    Harness<double> h(pool_text(cat("pool: ", pool, " kernel_size: 3 stride: 2 round_mode: FLOOR")), {2, 2, 6, 7});
    fill_distinct(h.bottom, 5);
    check_gradients(*h.layer, {&h.bottom}, {&h.top});
  }
}

TEST(Pooling, AverageDividesByTheWindowClippedToThePaddedInput) {
  Harness<double> h(pool_text("pool: AVE kernel_size: 3 stride: 1 pad: 1"), {1, 1, 3, 3});
  std::fill(h.bottom.mutable_data(), h.bottom.mutable_data() + 9, 1.0);
  h.forward();
  EXPECT_DOUBLE_EQ(h.top.data()[0], 4.0 / 9.0);  // corner: 4 real pixels, divisor 9
  EXPECT_DOUBLE_EQ(h.top.data()[1], 6.0 / 9.0);
  EXPECT_DOUBLE_EQ(h.top.data()[4], 1.0);
  // Kernel 3, stride 2, pad 1 on 4 pixels: the last window covers rows 3..5 of the padded
  // input; Caffe clips it to the padded end (row 4) and divides by 2 rows x 2 columns.
  Harness<double> edge(pool_text("pool: AVE kernel_size: 3 stride: 2 pad: 1"), {1, 1, 4, 4});
  std::fill(edge.bottom.mutable_data(), edge.bottom.mutable_data() + 16, 1.0);
  edge.forward();
  ASSERT_EQ(edge.top.shape(), (Shape{1, 1, 3, 3}));
  EXPECT_DOUBLE_EQ(edge.top.data()[8], 1.0 / 4.0);
}

// ---- InnerProduct ----

struct IpCase {
  std::string body;
  Shape shape;
  int axis;
  bool transpose, bias;
};

const std::vector<IpCase>& ip_cases() {
  static const std::vector<IpCase> cases = {
      {"num_output: 5", {3, 2, 3, 2}, 1, false, true},
      {"num_output: 4 transpose: true", {3, 7}, 1, true, true},
      {"num_output: 3 axis: 2 bias_term: false", {2, 3, 2, 2}, 2, false, false},
      {"num_output: 2 axis: -1 transpose: true", {2, 3, 4}, 2, true, true},
  };
  return cases;
}

std::string ip_text(const std::string& body) {
  return "name: 'ip' type: 'InnerProduct' inner_product_param { " + body +
         " weight_filler { type: 'gaussian' std: 1 } bias_filler { type: 'uniform' min: -1 max: 1 "
         "} }";
}

TYPED_TEST(SpatialForward, InnerProductMatchesNaiveLoops) {
  for (const IpCase& c : ip_cases()) {
    Harness<TypeParam> h(ip_text(c.body), c.shape);
    h.forward();
    const int64_t rows = count_of(c.shape, 0, c.axis);
    const int64_t k = count_of(c.shape, c.axis, static_cast<int>(c.shape.size()));
    const int64_t n = h.top.shape(-1);
    Shape want(c.shape.begin(), c.shape.begin() + c.axis);
    want.push_back(n);
    EXPECT_EQ(h.top.shape(), want) << c.body;
    const auto x = h.input(), w = h.param(0);
    std::vector<double> ref(rows * n);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t o = 0; o < n; ++o) {
        double sum = c.bias ? h.param(1)[o] : 0;
        for (int64_t i = 0; i < k; ++i)
          sum += x[r * k + i] * (c.transpose ? w[i * n + o] : w[o * k + i]);
        ref[r * n + o] = sum;
      }
    EXPECT_LT(relative_error(h.top, ref), tolerance<TypeParam>()) << c.body;
  }
}

TEST(InnerProduct, GradientsMatchFiniteDifferences) {
  for (const IpCase& c : ip_cases()) {
    SCOPED_TRACE(c.body);
    Harness<double> h(ip_text(c.body), c.shape);
    EXPECT_EQ(h.layer->params()[0]->shape(),
              c.transpose ? (Shape{count_of(c.shape, c.axis, static_cast<int>(c.shape.size())),
                                   h.top.shape(-1)})
                          : (Shape{h.top.shape(-1),
                                   count_of(c.shape, c.axis, static_cast<int>(c.shape.size()))}));
    check_gradients(*h.layer, {&h.bottom}, {&h.top});
  }
}

// Sufficient factors: with staging, backward copies each micro-batch's rows of out_diff and in
// and leaves the weight gradient alone, while the bias and input gradients stay the dense
// backward's; the rebuild from two micro-batches' rows is the float64 sum of their outer products.
TYPED_TEST(SpatialForward, InnerProductFactorsRebuildTheWeightGradient) {
  using T = TypeParam;
  for (const IpCase& c : ip_cases()) {
    SCOPED_TRACE(c.body);
    Harness<T> dense(ip_text(c.body), c.shape), factored(ip_text(c.body), c.shape);
    auto& f = dynamic_cast<SufficientFactors<T>&>(*factored.layer);
    const FactorShape shape = f.factor_shape();
    const int64_t inputs = count_of(c.shape, c.axis, static_cast<int>(c.shape.size()));
    ASSERT_EQ(shape.rows, count_of(c.shape, 0, c.axis));
    ASSERT_EQ(shape.inputs, inputs);
    ASSERT_EQ(shape.outputs, dense.top.shape(-1));
    std::vector<T> outs(2 * shape.out_elements()), ins(2 * shape.in_elements());
    f.stage_factors(outs.data(), ins.data());
    Blob<T>& weight = *factored.layer->params()[0];
    std::fill_n(weight.mutable_diff(), weight.count(), T(7));
    std::vector<double> ref(shape.outputs * inputs, 0.0);
    for (int micro = 0; micro < 2; ++micro) {
      for (Harness<T>* h : {&dense, &factored}) {
        fill_uniform(h->bottom, -1, 1, 10 + micro);
        h->forward();
        Blob<T> grad(default_cpu_device(), h->top.shape());
        fill_uniform(grad, -1, 1, 20 + micro);
        std::copy_n(grad.data(), grad.count(), h->top.mutable_diff());
        RunContext ctx;
        ctx.micro_batch = micro;
        h->layer->backward(ctx, {&h->top}, {true}, {&h->bottom});
      }
      const T* out = dense.top.diff();
      const T* in = dense.bottom.data();
      for (int64_t r = 0; r < shape.rows; ++r)
        for (int64_t o = 0; o < shape.outputs; ++o)
          for (int64_t i = 0; i < inputs; ++i)
            ref[c.transpose ? i * shape.outputs + o : o * inputs + i] +=
                double(out[r * shape.outputs + o]) * in[r * inputs + i];
      EXPECT_TRUE(std::equal(dense.bottom.diff(), dense.bottom.diff() + dense.bottom.count(),
                             factored.bottom.diff()));
      if (c.bias) {
        const Blob<T>& a = *dense.layer->params()[1];
        EXPECT_TRUE(std::equal(a.diff(), a.diff() + a.count(), factored.layer->params()[1]->diff()));
      }
    }
    EXPECT_TRUE(std::all_of(weight.diff(), weight.diff() + weight.count(),
                            [](T v) { return v == T(7); }));
    f.rebuild_weight_diff({}, outs.data(), ins.data(), 2 * shape.rows);
    Blob<T> rebuilt(default_cpu_device(), weight.shape());
    std::copy_n(weight.diff(), weight.count(), rebuilt.mutable_data());
    EXPECT_LT(relative_error(rebuilt, ref), tolerance<T>());
    f.stage_factors(nullptr, nullptr);  // back to the dense weight gradient
    factored.layer->backward({}, {&factored.top}, {true}, {&factored.bottom});
    EXPECT_FALSE(std::equal(rebuilt.data(), rebuilt.data() + rebuilt.count(), weight.diff()));
  }
}

// ---- LRN ----

struct LrnCase {
  std::string body;
  bool across;
  int64_t size;
  double alpha, beta, k;
};

const std::vector<LrnCase>& lrn_cases() {
  static const std::vector<LrnCase> cases = {
      {"local_size: 5 alpha: 0.5 beta: 0.75", true, 5, 0.5, 0.75, 1},
      {"local_size: 3 alpha: 2 beta: 0.6 k: 2", true, 3, 2, 0.6, 2},
      {"local_size: 3 alpha: 1.5 beta: 0.75 norm_region: WITHIN_CHANNEL", false, 3, 1.5, 0.75, 1},
      {"local_size: 5 alpha: 3 beta: 0.5 k: 7 norm_region: WITHIN_CHANNEL", false, 5, 3, 0.5, 1},
  };
  return cases;
}

std::string lrn_text(const std::string& body) {
  return "name: 'norm' type: 'LRN' lrn_param { " + body + " }";
}

// 17 x 19 = 323 columns: across channels, a full tile of 256 and a partial one (lrn_layer.cpp).
// The top starts as NaN, as reused memory may: forward only writes it.
TYPED_TEST(SpatialForward, LRNMatchesCaffesFormula) {
  for (const Shape& shape : {Shape{2, 7, 4, 3}, Shape{2, 7, 17, 19}})
    for (const LrnCase& c : lrn_cases()) {
      Harness<TypeParam> h(lrn_text(c.body), shape);
      std::fill_n(h.top.mutable_data(), h.top.count(), std::numeric_limits<TypeParam>::quiet_NaN());
      h.forward();
      // The model file holds alpha, beta and k as float.
      const auto ref =
          lrn_reference(h.input(), shape, c.across, c.size, static_cast<float>(c.alpha),
                        static_cast<float>(c.beta), static_cast<float>(c.k));
      EXPECT_LT(relative_error(h.top, ref), tolerance<TypeParam>())
          << c.body << " " << shape_string(shape);
    }
}

TEST(LRN, GradientsMatchFiniteDifferences) {
  for (const LrnCase& c : lrn_cases()) {
    SCOPED_TRACE(c.body);
    Harness<double> h(lrn_text(c.body), {2, 6, 3, 4});
    check_gradients(*h.layer, {&h.bottom}, {&h.top});
  }
  // Two tiles of columns, the second partial (16 x 17 = 272). The objective sums 1,088 outputs:
  // its finite differences carry ~1e-6 of rounding, where a tile's misplaced column errs by O(1).
  testing::GradientCheckOptions larger;
  larger.tolerance = 1e-5;
  for (const LrnCase& c : lrn_cases()) {
    if (!c.across) continue;
    SCOPED_TRACE(c.body + " over two tiles");
    Harness<double> h(lrn_text(c.body), {1, 4, 16, 17});
    check_gradients(*h.layer, {&h.bottom}, {&h.top}, larger);
  }
}

// The CUDA layer's ACROSS_CHANNELS backward (kernels/lrn.cu after cuDNN's forward) runs
// lrn_column.hpp one column per thread, from the input and the output gradient alone, and so does
// its forward in place; here the same functions, column by column, against the CPU layer's
// backward and forward (the forward in place too, to the bits it writes apart): windows wider
// than the channels, up to the widest its rings hold, at both ends of the channels.
TEST(LRN, AcrossColumnFunctionsMatchTheLayer) {
  struct Case {
    std::string body;
    Shape shape;
  };
  const std::vector<Case> cases = {
      {"local_size: 5 alpha: 0.5 beta: 0.75", {2, 7, 3, 4}},
      {"local_size: 3 alpha: 2 beta: 0.6 k: 2", {1, 9, 2, 5}},
      {"local_size: 7 alpha: 1.5 beta: 0.75", {2, 3, 2, 2}},
      {"local_size: 15 alpha: 4 beta: 0.8 k: 1.5", {1, 40, 3, 3}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.body);
    Harness<double> h(lrn_text(c.body), c.shape);
    h.forward();
    std::mt19937_64 rng(7);
    std::uniform_real_distribution<double> uniform(-1, 1);
    for (int64_t i = 0; i < h.top.count(); ++i) h.top.mutable_diff()[i] = uniform(rng);
    h.layer->backward({}, {&h.top}, {true}, {&h.bottom});
    const auto& p = h.layer->param().lrn_param();
    const int64_t plane = c.shape[2] * c.shape[3], channels = c.shape[1];
    std::vector<double> dx(static_cast<size_t>(h.bottom.count()));
    for (int64_t column = 0; column < c.shape[0] * plane; ++column) {
      const int64_t at = column / plane * channels * plane + column % plane;
      lrn::across_backward_column(h.bottom.data() + at, h.top.diff() + at, dx.data() + at, plane,
                                  static_cast<int>(channels), static_cast<int>(p.local_size()),
                                  double(p.alpha()) / double(p.local_size()), double(p.k()),
                                  double(p.beta()));
    }
    const std::vector<double> layer_dx(h.bottom.diff(), h.bottom.diff() + h.bottom.count());
    double worst = 0, scale = 1e-30;
    for (size_t i = 0; i < dx.size(); ++i) {
      worst = std::max(worst, std::abs(dx[i] - layer_dx[i]));
      scale = std::max(scale, std::abs(layer_dx[i]));
    }
    EXPECT_LT(worst / scale, 1e-13);
    std::vector<double> y(static_cast<size_t>(h.top.count())), in_place = h.input();
    for (int64_t column = 0; column < c.shape[0] * plane; ++column) {
      const int64_t at = column / plane * channels * plane + column % plane;
      for (double* out : {y.data(), in_place.data()})
        lrn::across_forward_column(
            out == y.data() ? h.bottom.data() + at : out + at, out + at, plane,
            static_cast<int>(channels), static_cast<int>(p.local_size()),
            double(p.alpha()) / double(p.local_size()), double(p.k()), double(p.beta()));
    }
    EXPECT_EQ(in_place, y);
    EXPECT_LT(relative_error(h.top, y), 1e-13);
  }
}

// LRN's forward may write its output over its input (Layer::forward_in_place: a planned net lets
// it where the input waits for backward as a 16-bit copy), to the bits it writes apart: across
// channels in NCHW (a full tile of columns and a partial one) and in a channel block of 16, and
// within a channel.
TEST(LRN, ForwardInPlaceGivesTheBitsOfApart) {
  const Shape shape{2, 32, 17, 19};
  for (const auto& [body, block] : std::vector<std::pair<std::string, int64_t>>{
           {"local_size: 5 alpha: 0.5 beta: 0.75", 1},
           {"local_size: 5 alpha: 0.5 beta: 0.75", 16},
           {"local_size: 3 alpha: 2 beta: 0.6 norm_region: WITHIN_CHANNEL", 1}}) {
    SCOPED_TRACE(cat(body, ", channel block ", block));
    Harness<float> h(lrn_text(body), shape);
    ASSERT_TRUE(h.layer->forward_in_place());
    h.bottom.set_channel_block(block);
    h.top.set_channel_block(block);
    const std::vector<float> input(h.bottom.data(), h.bottom.data() + h.bottom.count());
    h.forward();
    const std::vector<float> apart(h.top.data(), h.top.data() + h.top.count());
    h.top.bind_data(h.bottom.mutable_data());  // one place
    h.forward();
    EXPECT_EQ(std::vector<float>(h.bottom.data(), h.bottom.data() + h.bottom.count()), apart);
    EXPECT_NE(apart, input);
  }
}

// Across channels LRN's backward may write its input's gradient over its output's
// (Layer::gradient_in_place: the net gives the two one place), to the bits it writes apart: in
// NCHW (a full tile of columns and a partial one), in a channel block of 16, and in the CUDA
// layer's column function; WITHIN_CHANNEL may not on the CPU.
TEST(LRN, AcrossBackwardInPlaceGivesTheBitsOfApart) {
  const std::string text = lrn_text("local_size: 5 alpha: 0.5 beta: 0.75");
  const Shape shape{2, 32, 17, 19};
  const int64_t count = 2 * 32 * 17 * 19, plane = 17 * 19;
  std::vector<float> dy(static_cast<size_t>(count));
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(-1, 1);
  for (float& v : dy) v = uniform(rng);
  for (const int64_t block : {1, 16}) {
    SCOPED_TRACE(cat("channel block ", block));
    Harness<float> h(text, shape);
    ASSERT_TRUE(h.layer->gradient_in_place());
    h.bottom.set_channel_block(block);
    h.top.set_channel_block(block);
    h.forward();
    std::copy(dy.begin(), dy.end(), h.top.mutable_diff());
    h.layer->backward({}, {&h.top}, {true}, {&h.bottom});
    const std::vector<float> apart(h.bottom.diff(), h.bottom.diff() + count);
    h.bottom.bind_diff(h.top.mutable_diff());  // one place
    h.layer->backward({}, {&h.top}, {true}, {&h.bottom});
    EXPECT_EQ(0, std::memcmp(apart.data(), h.top.diff(), count * sizeof(float)));
    EXPECT_NE(0, std::memcmp(apart.data(), dy.data(), count * sizeof(float)));
  }
  Harness<float> h(text, shape);
  std::vector<float> apart(static_cast<size_t>(count)), together = dy;
  for (int64_t column = 0; column < 2 * plane; ++column) {
    const int64_t at = column / plane * 32 * plane + column % plane;
    lrn::across_backward_column(h.bottom.data() + at, dy.data() + at, apart.data() + at, plane, 32,
                                5, 0.1f, 1.f, 0.75f);
    lrn::across_backward_column(h.bottom.data() + at, together.data() + at, together.data() + at,
                                plane, 32, 5, 0.1f, 1.f, 0.75f);
  }
  EXPECT_EQ(apart, together);
  EXPECT_FALSE(
      Harness<float>(lrn_text(lrn_cases()[2].body), {1, 2, 3, 3}).layer->gradient_in_place());
}

// ---- configuration errors ----

template <typename T = float>
std::string setup_error(const std::string& text, const Shape& shape) {
  try {
    Harness<T> h(text, shape);
  } catch (const ModelError& e) {
    return e.what();
  }
  return "no error";
}

TEST(SpatialErrors, ConvolutionNamesTheLayerAndTheProblem) {
  const std::string base = "name: 'c1' type: 'Convolution' convolution_param { ";
  EXPECT_EQ(setup_error(base + "num_output: 2 kernel_size: 5 }", {1, 1, 3, 3}),
            "layer 'c1' (Convolution): kernel 5x5 is larger than the padded input 3x3");
  EXPECT_THAT(
      setup_error(base + "num_output: 2 kernel_size: 3 dilation: 3 pad: 1 }", {1, 1, 4, 4}),
      ::testing::HasSubstr("kernel 3x3 (dilated to 7x7) is larger than the padded input 6x6"));
  EXPECT_THAT(setup_error(base + "num_output: 4 kernel_size: 1 group: 2 }", {1, 3, 4, 4}),
              ::testing::HasSubstr("input channels (3) must be a multiple of group (2)"));
  EXPECT_THAT(setup_error(base + "num_output: 3 kernel_size: 1 group: 2 }", {1, 4, 4, 4}),
              ::testing::HasSubstr("num_output (3) must be a multiple of group (2)"));
  EXPECT_THAT(setup_error(base + "kernel_size: 3 }", {1, 1, 4, 4}),
              ::testing::HasSubstr("layer 'c1' (Convolution): needs num_output > 0"));
  EXPECT_THAT(setup_error(base + "num_output: 2 }", {1, 1, 4, 4}),
              ::testing::HasSubstr("needs a kernel size"));
  EXPECT_THAT(setup_error(base + "num_output: 2 kernel_h: 3 }", {1, 1, 4, 4}),
              ::testing::HasSubstr("give both kernel_h and kernel_w"));
  EXPECT_THAT(
      setup_error(base + "num_output: 2 kernel_size: 3 kernel_h: 3 kernel_w: 3 }", {1, 1, 4, 4}),
      ::testing::HasSubstr("layer 'c1' (Convolution): give either kernel_size or"));
  EXPECT_THAT(setup_error(base + "num_output: 2 kernel_size: 1 }", {4, 4}),
              ::testing::HasSubstr("needs a 4-D bottom (N x C x H x W), got 4x4"));
}

TEST(SpatialErrors, ConvolutionRejectsABottomWithOtherChannelsOnReshape) {
  Harness<float> h(
      "name: 'c' type: 'Convolution' convolution_param { num_output: 2 kernel_size: 1 }",
      {1, 3, 4, 4});
  h.bottom.reshape({1, 5, 4, 4});
  EXPECT_THROW(h.layer->reshape({&h.bottom}, {&h.top}), ModelError);
}

TEST(SpatialErrors, PoolingNamesTheLayerAndTheProblem) {
  EXPECT_EQ(setup_error(pool_text("kernel_size: 4"), {1, 1, 3, 3}),
            "layer 'pool' (Pooling): kernel 4x4 is larger than the padded input 3x3");
  EXPECT_THAT(setup_error(pool_text("global_pooling: true kernel_size: 2"), {1, 1, 3, 3}),
              ::testing::HasSubstr("global_pooling takes its kernel from the bottom"));
  EXPECT_THAT(setup_error(pool_text("global_pooling: true stride: 2"), {1, 1, 3, 3}),
              ::testing::HasSubstr("global_pooling needs pad = 0 and stride = 1"));
  EXPECT_THAT(setup_error(pool_text("kernel_size: 2 pad: 2"), {1, 1, 6, 6}),
              ::testing::HasSubstr("pad 2x2 must be smaller than the kernel 2x2"));
  EXPECT_THAT(setup_error(pool_text("pool: AVE"), {1, 1, 6, 6}),
              ::testing::HasSubstr("needs a kernel"));
  EXPECT_THAT(setup_error(pool_text("kernel_size: 2 stride_h: 2"), {1, 1, 6, 6}),
              ::testing::HasSubstr("give both stride_h and stride_w"));
  EXPECT_THAT(setup_error(pool_text("kernel_size: 2"), {1, 6, 6}),
              ::testing::HasSubstr("needs a 4-D bottom"));
}

TEST(SpatialErrors, InnerProductNamesTheLayerAndTheProblem) {
  EXPECT_EQ(setup_error("name: 'fc' type: 'InnerProduct' inner_product_param { }", {2, 3}),
            "layer 'fc' (InnerProduct): needs num_output > 0");
  EXPECT_THAT(setup_error(ip_text("num_output: 2 axis: 3"), {2, 3}),
              ::testing::HasSubstr("axis 3 is out of range for a bottom of shape 2x3"));
  Harness<float> h(ip_text("num_output: 2"), {2, 3, 4});
  h.bottom.reshape({2, 13});
  try {
    h.layer->reshape({&h.bottom}, {&h.top});
    ADD_FAILURE() << "no error for a bottom of the wrong size";
  } catch (const ModelError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("does not have 12 elements from axis 1 on"));
  }
}

TEST(SpatialErrors, LRNNamesTheLayerAndTheProblem) {
  EXPECT_EQ(setup_error(lrn_text("local_size: 4"), {1, 5, 2, 2}),
            "layer 'norm' (LRN): local_size must be odd and > 0, got 4");
  EXPECT_THAT(setup_error(lrn_text("local_size: 3"), {5, 2, 2}),
              ::testing::HasSubstr("needs a 4-D bottom"));
}

TEST(SpatialRegistry, KnowsTheSpatialLayers) {
  const auto types = known_layer_types();
  for (const char* t : {"Convolution", "InnerProduct", "LRN", "Pooling"})
    EXPECT_NE(std::find(types.begin(), types.end(), t), types.end()) << t;
}

}  // namespace
}  // namespace cgdp
