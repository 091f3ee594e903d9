// A layer under test on the CPU with its own bottoms and tops, and the checks the layer tests share:
// float64 references, errors, in-place runs against out-of-place ones.
#pragma once

#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "cgdp/device/cpu_device.hpp"
#include "cgdp/layers/registry.hpp"
#include "support/gradient_checker.hpp"

namespace cgdp::testing {

proto::LayerParameter parse_layer(const std::string& text) {
  proto::LayerParameter p;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &p)) << text;
  return p;
}

// A layer with its own bottoms (uniform in [-1, 1)) and tops.
template <typename T = double>
struct Case {
  Case(const std::string& text, const std::vector<Shape>& shapes, int tops, uint64_t seed = 1)
      : layer(create_layer<T>(parse_layer(text), default_cpu_device())) {
    for (size_t i = 0; i < shapes.size(); ++i) {
      Blob<T>& b = add(shapes[i]);
      fill_uniform(b, -1, 1, seed + i);
      bottom.push_back(&b);
    }
    for (int i = 0; i < tops; ++i) top.push_back(&add({}));
  }
  Blob<T>& add(const Shape& shape) {
    storage.push_back(std::make_unique<Blob<T>>(default_cpu_device(), shape));
    return *storage.back();
  }
  void setup() {
    Rng rng(5);
    layer->setup(bottom, top, rng);
  }
  void forward(const RunContext& ctx = {}) { layer->forward(ctx, bottom, top); }
  std::vector<T> top_data(int i = 0) const {
    return {top[i]->data(), top[i]->data() + top[i]->count()};
  }

  std::unique_ptr<Layer<T>> layer;
  std::vector<std::unique_ptr<Blob<T>>> storage;
  BlobVec<T> bottom, top;
};

template <typename T>
void set(Blob<T>& blob, const std::vector<double>& values) {
  ASSERT_EQ(blob.count(), static_cast<int64_t>(values.size())) << shape_string(blob.shape());
  for (size_t i = 0; i < values.size(); ++i) blob.mutable_data()[i] = static_cast<T>(values[i]);
}

void expect_close(double got, double want, double tol = 1e-12) {
  EXPECT_LE(std::abs(got - want), tol * std::max(1.0, std::abs(want))) << got << " vs " << want;
}

template <typename T>
void expect_all_close(const std::vector<T>& got, const std::vector<double>& want,
                      double tol = 1e-12) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    SCOPED_TRACE(cat("element ", i));
    expect_close(got[i], want[i], tol);
  }
}

// Message of the exception E that `f` throws ("" and a failure if none).
template <typename E, typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an exception";
  return "";
}

// Moves values at least `gap` away from `at` (finite differences must not straddle a kink).
void keep_away(Blob<double>& blob, double at, double gap) {
  for (double& v : blob.mutable_data_span())
    if (std::abs(v - at) < gap) v = at + (v < at ? -gap : gap);
}

// Runs the layer in place (top == bottom) and out of place on the same input and top gradient;
// data, bottom gradient and parameter gradients must agree exactly.
void expect_in_place_matches(const std::string& text, const Shape& shape, const RunContext& ctx) {
  SCOPED_TRACE(text);
  Case out(text, {shape}, 1), in(text, {shape}, 0);
  in.top = {in.bottom[0]};
  out.setup();
  in.setup();
  out.forward(ctx);
  in.forward(ctx);
  EXPECT_EQ(in.top_data(), out.top_data());
  fill_uniform(out.add(shape), -1, 1, 99);
  Blob<double>& dy = *out.storage.back();
  std::copy(dy.data(), dy.data() + dy.count(), out.top[0]->mutable_diff());
  std::copy(dy.data(), dy.data() + dy.count(), in.top[0]->mutable_diff());
  for (Case<double>* c : {&out, &in})
    for (auto& p : c->layer->params()) std::fill_n(p->mutable_diff(), p->count(), 0.0);
  out.layer->backward(ctx, out.top, {true}, out.bottom);
  in.layer->backward(ctx, in.top, {true}, in.bottom);
  const auto& d_out = out.bottom[0]->diff_span();
  const auto& d_in = in.bottom[0]->diff_span();
  EXPECT_TRUE(std::equal(d_out.begin(), d_out.end(), d_in.begin()));
  for (size_t p = 0; p < out.layer->params().size(); ++p) {
    const auto a = out.layer->params()[p]->diff_span(), b = in.layer->params()[p]->diff_span();
    EXPECT_TRUE(std::equal(a.begin(), a.end(), b.begin())) << "param " << p;
  }
}

}  // namespace cgdp::testing
