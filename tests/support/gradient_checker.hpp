// Checks a layer's backward against central finite differences of its forward, in float64.
// The scalar objective is a fixed random projection of the tops, L = sum_i w_i * top_i, so every
// top element's gradient path is exercised.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "cgdp/layers/layer.hpp"

namespace cgdp::testing {

struct GradientCheckOptions {
  double step = 1e-6;
  double tolerance = 1e-6;        // on |analytic - numeric| / max(floor, |analytic|, |numeric|)
  double relative_floor = 1e-3;  // denominators below this are treated as this (avoids 0/0)
  bool check_params = true;
  std::vector<int> check_bottoms;  // empty: every bottom the layer can propagate to
  uint64_t seed = 7;
};

inline double objective(const BlobVec<double>& top, const std::vector<std::vector<double>>& w) {
  double sum = 0;
  for (size_t t = 0; t < top.size(); ++t)
    for (int64_t i = 0; i < top[t]->count(); ++i) sum += w[t][i] * top[t]->data()[i];
  return sum;
}

// Runs the check; reports every mismatching element through GoogleTest with its coordinates.
inline void check_gradients(Layer<double>& layer, const BlobVec<double>& bottom,
                            const BlobVec<double>& top, const GradientCheckOptions& opt = {},
                            RunContext ctx = {}) {
  std::mt19937_64 rng(opt.seed);
  std::uniform_real_distribution<double> uni(-1.0, 1.0);
  layer.forward(ctx, bottom, top);
  std::vector<std::vector<double>> w(top.size());
  for (size_t t = 0; t < top.size(); ++t) {
    w[t].resize(top[t]->count());
    for (double& v : w[t]) v = uni(rng);
  }
  // Analytic gradients.
  for (size_t t = 0; t < top.size(); ++t)
    for (int64_t i = 0; i < top[t]->count(); ++i) top[t]->mutable_diff()[i] = w[t][i];
  for (auto& p : layer.params())
    for (double& v : p->mutable_diff_span()) v = 0;
  std::vector<int> bottoms = opt.check_bottoms;
  if (bottoms.empty())
    for (int b = 0; b < static_cast<int>(bottom.size()); ++b)
      if (layer.can_backward_to(b)) bottoms.push_back(b);
  std::vector<bool> propagate(bottom.size(), false);
  for (int b : bottoms) propagate[b] = true;
  for (Blob<double>* b : bottom)
    for (double& v : b->mutable_diff_span()) v = 0;
  layer.backward(ctx, top, propagate, bottom);

  auto check_blob = [&](Blob<double>& blob, const std::string& what) {
    const std::vector<double> analytic(blob.diff(), blob.diff() + blob.count());
    int failures = 0;
    for (int64_t i = 0; i < blob.count(); ++i) {
      double& x = blob.mutable_data()[i];
      const double saved = x;
      x = saved + opt.step;
      layer.forward(ctx, bottom, top);
      const double plus = objective(top, w);
      x = saved - opt.step;
      layer.forward(ctx, bottom, top);
      const double minus = objective(top, w);
      x = saved;
      const double numeric = (plus - minus) / (2 * opt.step);
      const double scale = std::max({opt.relative_floor, std::abs(analytic[i]), std::abs(numeric)});
      const double rel = std::abs(analytic[i] - numeric) / scale;
      if (rel > opt.tolerance && failures++ < 10)
        ADD_FAILURE() << layer.type() << " '" << layer.name() << "' " << what << "[" << i
                      << "] of shape " << shape_string(blob.shape()) << ": analytic " << analytic[i]
                      << " vs numeric " << numeric << " (relative error " << rel << ")";
    }
    if (failures > 10) ADD_FAILURE() << "... and " << failures - 10 << " more in " << what;
  };
  for (int b : bottoms) check_blob(*bottom[b], "bottom " + std::to_string(b));
  if (opt.check_params)
    for (size_t p = 0; p < layer.params().size(); ++p)
      check_blob(*layer.params()[p], "param " + std::to_string(p));
  layer.forward(ctx, bottom, top);  // leave the tops consistent with the inputs
}

// Fills a blob's data with uniform values in [lo, hi).
template <typename T>
void fill_uniform(Blob<T>& blob, double lo, double hi, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  for (T& v : blob.mutable_data_span()) v = static_cast<T>(dist(rng));
}

}  // namespace cgdp::testing
