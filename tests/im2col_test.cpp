// im2col against its defining formula, and col2im against its adjoint's, in float and double, for
// row widths that reach every vector path (whole vectors, masked tails, rows under one vector).
#include "cgdp/layers/im2col.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace cgdp {
namespace {

ConvGeometry geometry(int64_t channels, int64_t height, int64_t width, int64_t kernel, int64_t pad,
                      int64_t stride, int64_t dilation = 1) {
  ConvGeometry g;
  g.channels = channels;
  g.height = height;
  g.width = width;
  g.kernel_h = g.kernel_w = kernel;
  g.pad_h = g.pad_w = pad;
  g.stride_h = g.stride_w = stride;
  g.dilation_h = g.dilation_w = dilation;
  return g;
}

std::string describe(const ConvGeometry& g) {
  return std::to_string(g.channels) + "x" + std::to_string(g.height) + "x" +
         std::to_string(g.width) + " kernel " + std::to_string(g.kernel_h) + " pad " +
         std::to_string(g.pad_h) + " stride " + std::to_string(g.stride_h) + " dilation " +
         std::to_string(g.dilation_h) + " (out_w " + std::to_string(g.out_w()) + ")";
}

std::vector<ConvGeometry> geometries() {
  std::vector<ConvGeometry> all;
  // Output widths 1..20 at stride 1: under one vector, one, one plus every tail length, two.
  for (int64_t width = 1; width <= 20; ++width) all.push_back(geometry(2, 3, width, 3, 1, 1));
  all.push_back(geometry(3, 14, 14, 5, 2, 1));     // fashion_cnn's conv2: out_w 14 = 8 + 6
  all.push_back(geometry(2, 6, 13, 3, 0, 1));      // no padding: no scratch copy
  all.push_back(geometry(2, 9, 17, 3, 0, 2));      // stride 2, no padding
  all.push_back(geometry(2, 11, 23, 3, 2, 1, 2));  // dilation 2
  return all;
}

// Small integers, so col2im's sums are exact in float and can be compared bitwise.
template <typename T>
std::vector<T> small_integers(size_t count, int seed) {
  std::vector<T> v(count);
  for (size_t i = 0; i < count; ++i)
    v[i] = static_cast<T>(static_cast<int>((i * 7 + seed) % 9) - 4);
  return v;
}

template <typename T>
class Im2col : public ::testing::Test {};
using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(Im2col, Precisions);

TYPED_TEST(Im2col, MatchesItsDefinition) {
  using T = TypeParam;
  for (const ConvGeometry& g : geometries()) {
    SCOPED_TRACE(describe(g));
    const int64_t out_h = g.out_h(), out_w = g.out_w();
    const auto image = small_integers<T>(g.channels * g.height * g.width, 1);
    std::vector<T> col(g.col_rows() * out_h * out_w, T(99)), scratch(g.scratch_count());
    im2col(image.data(), g, col.data(), scratch.data());
    int64_t mismatches = 0;
    for (int64_t c = 0; c < g.channels; ++c)
      for (int64_t i = 0; i < g.kernel_h; ++i)
        for (int64_t j = 0; j < g.kernel_w; ++j)
          for (int64_t oh = 0; oh < out_h; ++oh)
            for (int64_t ow = 0; ow < out_w; ++ow) {
              const int64_t h = oh * g.stride_h - g.pad_h + i * g.dilation_h;
              const int64_t w = ow * g.stride_w - g.pad_w + j * g.dilation_w;
              const bool inside = h >= 0 && h < g.height && w >= 0 && w < g.width;
              const T want = inside ? image[(c * g.height + h) * g.width + w] : T(0);
              const int64_t row = (c * g.kernel_h + i) * g.kernel_w + j;
              mismatches += col[row * out_h * out_w + oh * out_w + ow] != want;
            }
    EXPECT_EQ(mismatches, 0);
  }
}

// col2im, im2col's adjoint, adds every column entry into the pixel im2col read it from, once, and
// overwrites what its output held.
TYPED_TEST(Im2col, Col2imSumsEachEntryIntoItsPixel) {
  using T = TypeParam;
  for (const ConvGeometry& g : geometries()) {
    SCOPED_TRACE(describe(g));
    const int64_t pixels = g.channels * g.height * g.width;
    const int64_t entries = g.col_rows() * g.out_h() * g.out_w();
    const auto y = small_integers<T>(entries, 5);
    std::vector<T> back(pixels, T(1000)), scratch(g.scratch_count());
    col2im(y.data(), g, back.data(), scratch.data());
    std::vector<double> want(pixels, 0.0);
    for (int64_t c = 0; c < g.channels; ++c)
      for (int64_t i = 0; i < g.kernel_h; ++i)
        for (int64_t j = 0; j < g.kernel_w; ++j)
          for (int64_t oh = 0; oh < g.out_h(); ++oh)
            for (int64_t ow = 0; ow < g.out_w(); ++ow) {
              const int64_t h = oh * g.stride_h - g.pad_h + i * g.dilation_h;
              const int64_t w = ow * g.stride_w - g.pad_w + j * g.dilation_w;
              if (h < 0 || h >= g.height || w < 0 || w >= g.width) continue;
              const int64_t row = (c * g.kernel_h + i) * g.kernel_w + j;
              want[(c * g.height + h) * g.width + w] +=
                  double(y[(row * g.out_h() + oh) * g.out_w() + ow]);
            }
    int64_t mismatches = 0;
    for (int64_t k = 0; k < pixels; ++k) mismatches += double(back[k]) != want[k];
    EXPECT_EQ(mismatches, 0);
  }
}

}  // namespace
}  // namespace cgdp
