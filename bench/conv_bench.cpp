// Convolution speed against plain SGEMM: for each conv layer of fashion_cnn and AlexNet, the
// layer's forward and backward (weights + data) GFLOP/s next to cblas_sgemm's on exactly the
// GEMMs the layer issues (one per image and group), run both ways the layer could: images in
// order with OpenBLAS threading each GEMM ("serial"), and images split over OpenMP threads with
// single-threaded GEMMs ("omp"). Each benchmark iteration times one pass of each of the three
// back to back, so that the ratio of a pair is measured at one moment of a shared machine whose
// speed changes by 2x within a minute; the figures are medians over the iterations. Each layer
// runs on im2col + OpenBLAS ("gemm", engine: CAFFE) and, when cgdp is built with oneDNN and the
// layer has the input channels for it, on oneDNN ("onednn", the default for float).
#include <benchmark/benchmark.h>
#include <google/protobuf/text_format.h>
#include <omp.h>

#include <algorithm>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "cgdp/device/cpu_device.hpp"
#include "cgdp/layers/blas.hpp"
#include "cgdp/layers/convolution_layer.hpp"
#include "cgdp/layers/registry.hpp"
#ifdef CGDP_HAVE_ONEDNN
#include "layers/onednn_convolution.hpp"
#endif
#include "paired_timing.hpp"

namespace cgdp {
namespace {

using bench::median;
using bench::seconds;

struct ConvSpec {
  const char* name;
  int64_t batch, channels, height, width, num_output, kernel, pad, stride, group;
};

const ConvSpec kSpecs[] = {
    {"fashion/conv1", 64, 1, 28, 28, 32, 5, 2, 1, 1},
    {"fashion/conv2", 64, 32, 14, 14, 64, 5, 2, 1, 1},
    {"alexnet/conv1", 16, 3, 227, 227, 96, 11, 0, 4, 1},
    {"alexnet/conv2", 16, 96, 27, 27, 256, 5, 2, 1, 2},
    {"alexnet/conv3", 16, 256, 13, 13, 384, 3, 1, 1, 1},
    {"alexnet/conv4", 16, 384, 13, 13, 384, 3, 1, 1, 2},
    {"alexnet/conv5", 16, 384, 13, 13, 256, 3, 1, 1, 2},
};

void fill_random(float* data, int64_t count) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (int64_t i = 0; i < count; ++i) data[i] = dist(rng);
}

// A set-up layer with random input and output gradient.
struct ConvRig {
  Blob<float> bottom{default_cpu_device()}, top{default_cpu_device()};
  std::unique_ptr<Layer<float>> layer;

  ConvRig(const ConvSpec& s, const std::string& engine) {
    proto::LayerParameter param;
    google::protobuf::TextFormat::ParseFromString(
        cat("name: 'conv' type: 'Convolution' convolution_param { engine: ", engine,
            " num_output: ", s.num_output,
            " kernel_size: ", s.kernel, " pad: ", s.pad, " stride: ", s.stride, " group: ", s.group,
            " weight_filler { type: 'gaussian' std: 0.01 } }"),
        &param);
    bottom.reshape({s.batch, s.channels, s.height, s.width});
    fill_random(bottom.mutable_data(), bottom.count());
    layer = create_layer<float>(param, default_cpu_device());
    Rng rng(1);
    layer->setup({&bottom}, {&top}, rng);
    fill_random(top.mutable_diff(), top.count());
    if (conv().uses_onednn() != (engine == "DEFAULT"))
      throw std::runtime_error(cat(s.name, ": not on the engine asked for (", engine, ")"));
  }
  const ConvolutionLayer<float>& conv() const {
    return static_cast<const ConvolutionLayer<float>&>(*layer);
  }
  // Multiply-adds x 2 of one forward pass (the bias is not counted).
  double forward_flops() const {
    const auto& c = conv();
    return 2.0 * static_cast<double>(bottom.shape(0) * c.group() * c.group_out_channels() *
                                     c.group_col_rows() * c.out_pixels());
  }
};

// The layer's GEMM operands with plain buffers: per-thread column matrices, per-image outputs.
struct GemmRig {
  int64_t images, groups, m, k, n;  // per group: [m x k] * [k x n]
  std::vector<float> weight, cols, out;

  GemmRig(const ConvRig& conv, int threads)
      : images(conv.bottom.shape(0)),
        groups(conv.conv().group()),
        m(conv.conv().group_out_channels()),
        k(conv.conv().group_col_rows()),
        n(conv.conv().out_pixels()),
        weight(groups * m * k),
        cols(threads * groups * k * n),
        out(images * groups * m * n) {
    fill_random(weight.data(), static_cast<int64_t>(weight.size()));
    fill_random(cols.data(), static_cast<int64_t>(cols.size()));
    fill_random(out.data(), static_cast<int64_t>(out.size()));
  }
  void forward(int64_t image, int thread) {
    for (int64_t g = 0; g < groups; ++g)
      blas::gemm(false, false, m, n, k, 1.f, &weight[g * m * k],
                 &cols[(thread * groups + g) * k * n], 0.f, &out[((image * groups) + g) * m * n]);
  }
  // Weight gradient (out_diff * cols^T, accumulated) then column gradient (W^T * out_diff).
  void backward(int64_t image, int thread, float* weight_diff) {
    for (int64_t g = 0; g < groups; ++g) {
      const float* out_diff = &out[((image * groups) + g) * m * n];
      float* col = &cols[(thread * groups + g) * k * n];
      blas::gemm(false, true, m, k, n, 1.f, out_diff, col, 1.f, weight_diff + g * m * k);
      blas::gemm(true, false, k, n, m, 1.f, &weight[g * m * k], out_diff, 0.f, col);
    }
  }
};

// One SGEMM pass over the batch's GEMMs, serial or split over OpenMP threads like the layer.
template <bool kBackward>
void sgemm_pass(GemmRig& g, std::vector<float>& weight_diff, bool omp) {
  auto one = [&](int64_t image, int thread) {
    if (kBackward) {
      g.backward(image, thread, &weight_diff[thread * g.weight.size()]);
    } else {
      g.forward(image, thread);
    }
  };
  if (omp) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < g.images; ++i) one(i, omp_get_thread_num());
  } else {
    for (int64_t i = 0; i < g.images; ++i) one(i, 0);
  }
}

// Counters: each pass's GFLOP/s (median over iterations) and `ratio`, the median over iterations
// of the layer's rate over the faster SGEMM form's in the same iteration (the figure to judge).
template <bool kBackward>
void paired(benchmark::State& state, const ConvSpec* spec, const std::string& engine) {
  ConvRig conv(*spec, engine);
  if (kBackward) conv.layer->forward({}, {&conv.bottom}, {&conv.top});
  GemmRig g(conv, omp_get_max_threads());
  std::vector<float> weight_diff(omp_get_max_threads() * g.weight.size(), 0.f);
  std::vector<double> layer_s, omp_s, serial_s, ratios;
  for (auto _ : state) {
    layer_s.push_back(seconds([&] {
      if (kBackward) {
        conv.layer->backward({}, {&conv.top}, {true}, {&conv.bottom});
      } else {
        conv.layer->forward({}, {&conv.bottom}, {&conv.top});
      }
    }));
    omp_s.push_back(seconds([&] { sgemm_pass<kBackward>(g, weight_diff, true); }));
    serial_s.push_back(seconds([&] { sgemm_pass<kBackward>(g, weight_diff, false); }));
    ratios.push_back(std::min(omp_s.back(), serial_s.back()) / layer_s.back());
  }
  const double gflop = (kBackward ? 2 : 1) * conv.forward_flops() * 1e-9;
  state.counters["GFLOP"] = gflop;
  state.counters["conv_GFLOP/s"] = gflop / median(layer_s);
  state.counters["sgemm_omp_GFLOP/s"] = gflop / median(omp_s);
  state.counters["sgemm_serial_GFLOP/s"] = gflop / median(serial_s);
  state.counters["ratio"] = median(ratios);
}

#ifdef CGDP_HAVE_ONEDNN
// bf16 against fp32 on oneDNN (issue 36): the same convolution both ways, back to back in every
// iteration; `speedup` is the median over iterations of fp32's time over bf16's.
template <bool kBackward>
void bf16_pair(benchmark::State& state, const ConvSpec* s) {
  OneDnnShape shape;
  shape.batch = s->batch;
  shape.geometry = ConvGeometry{s->channels, s->height, s->width,  s->kernel, s->kernel, s->pad,
                                s->pad,      s->stride, s->stride, 1,         1};
  shape.num_output = s->num_output;
  shape.group = s->group;
  auto fp32 = OneDnnConvolution::create(shape);
  shape.bf16 = true;
  auto bf16 = OneDnnConvolution::create(shape);
  if (!fp32 || !bf16) return state.SkipWithError("no oneDNN convolution for this shape");
  const int64_t out_count =
      s->batch * s->num_output * shape.geometry.out_h() * shape.geometry.out_w();
  std::vector<float> in(s->batch * s->channels * s->height * s->width),
      weight(s->num_output * s->channels / s->group * s->kernel * s->kernel), bias(s->num_output),
      out(out_count), out_diff(out_count), in_diff(in.size()), weight_diff(weight.size()),
      bias_diff(bias.size());
  for (auto* v : {&in, &weight, &bias, &out_diff})
    fill_random(v->data(), static_cast<int64_t>(v->size()));
  auto pass = [&](OneDnnConvolution& conv) {
    return seconds([&] {
      if (kBackward) {
        conv.backward(in.data(), weight.data(), out.data(), out_diff.data(), weight_diff.data(),
                      bias_diff.data(), in_diff.data());
      } else {
        conv.forward(in.data(), weight.data(), bias.data(), out.data());
      }
    });
  };
  std::vector<double> fp32_s, bf16_s, speedups;
  for (auto _ : state) {
    fp32_s.push_back(pass(*fp32));
    bf16_s.push_back(pass(*bf16));
    speedups.push_back(fp32_s.back() / bf16_s.back());
  }
  const double gflop = (kBackward ? 4.0 : 2.0) * static_cast<double>(out_count) *
                       static_cast<double>(s->channels / s->group * s->kernel * s->kernel) * 1e-9;
  state.counters["fp32_GFLOP/s"] = gflop / median(fp32_s);
  state.counters["bf16_GFLOP/s"] = gflop / median(bf16_s);
  state.counters["speedup"] = median(speedups);
}
#endif

void register_all() {
  for (const ConvSpec& s : kSpecs) {
    const std::string n = s.name;
    auto tune = [](benchmark::internal::Benchmark* b) {
      b->UseRealTime()->MeasureProcessCPUTime()->Unit(benchmark::kMillisecond)->MinTime(1.0);
    };
    std::vector<std::pair<std::string, std::string>> engines = {{"gemm", "CAFFE"}};
#ifdef CGDP_HAVE_ONEDNN
    // First layers (1 or 3 channels) stay on GEMM by default; engine: DEFAULT cannot force it.
    if (s.channels / s.group >= kOneDnnMinChannels) engines.push_back({"onednn", "DEFAULT"});
#endif
    for (const auto& [label, engine] : engines) {
      const std::string name = n + "/" + label;
      tune(benchmark::RegisterBenchmark((name + "/forward").c_str(), paired<false>, &s, engine));
      tune(benchmark::RegisterBenchmark((name + "/backward").c_str(), paired<true>, &s, engine));
    }
#ifdef CGDP_HAVE_ONEDNN
    if (s.channels / s.group >= kOneDnnMinChannels) {
      tune(benchmark::RegisterBenchmark((n + "/bf16/forward").c_str(), bf16_pair<false>, &s));
      tune(benchmark::RegisterBenchmark((n + "/bf16/backward").c_str(), bf16_pair<true>, &s));
    }
#endif
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
