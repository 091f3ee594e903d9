// Caffe's fillers beyond the plain distributions: bilinear upsampling kernels, positive_unitball
// rows, sparse gaussian; and the shapes they refuse.
#include "cgdp/layers/filler.hpp"

#include <gtest/gtest.h>

#include <numeric>

#include "cgdp/device/cpu_device.hpp"

namespace cgdp {
namespace {

proto::FillerParameter filler(const std::string& type) {
  proto::FillerParameter f;
  f.set_type(type);
  return f;
}

// Caffe's BilinearFiller for K = 4 (stride-2 upsampling): f = 2, c = 0.75, so each axis weighs
// 1 - |x / 2 - 0.75| = 0.25, 0.75, 0.75, 0.25, and the kernel is their outer product.
TEST(Filler, BilinearIsTheOuterProductOfTheTentWeights) {
  Blob<double> blob(default_cpu_device(), {2, 1, 4, 4});
  Rng rng(1);
  fill(blob, filler("bilinear"), rng);
  const double w[] = {0.25, 0.75, 0.75, 0.25};
  for (int n = 0; n < 2; ++n)
    for (int y = 0; y < 4; ++y)
      for (int x = 0; x < 4; ++x) EXPECT_DOUBLE_EQ(blob.data()[n * 16 + y * 4 + x], w[y] * w[x]) << y << "," << x;
  // K = 5 (stride 3: f = 3, c = 2/3): 1/3, 2/3, 1, 2/3, 1/3.
  Blob<double> odd(default_cpu_device(), {1, 1, 5, 5});
  fill(odd, filler("bilinear"), rng);
  EXPECT_NEAR(odd.data()[12], 1.0, 1e-15);
  EXPECT_NEAR(odd.data()[0], 1.0 / 9, 1e-15);
  EXPECT_NEAR(odd.data()[1], 2.0 / 9, 1e-15);
  Blob<double> oblong(default_cpu_device(), {1, 1, 3, 4});
  EXPECT_THROW(fill(oblong, filler("bilinear"), rng), Error);
}

TEST(Filler, PositiveUnitballRowsArePositiveAndSumToOne) {
  Blob<double> blob(default_cpu_device(), {5, 7});
  Rng rng(2);
  fill(blob, filler("positive_unitball"), rng);
  for (int o = 0; o < 5; ++o) {
    const double* row = blob.data() + o * 7;
    EXPECT_NEAR(std::accumulate(row, row + 7, 0.0), 1.0, 1e-12);
    for (int j = 0; j < 7; ++j) EXPECT_GT(row[j], 0.0);
  }
}

// sparse: s of every weight row's fan survives on average (Caffe: probability s / outputs).
TEST(Filler, SparseGaussianKeepsSparseOverOutputsOfTheWeights) {
  Blob<double> blob(default_cpu_device(), {100, 400});
  proto::FillerParameter f = filler("gaussian");
  f.set_sparse(25);  // keep a quarter
  Rng rng(3);
  fill(blob, f, rng);
  int64_t nonzero = 0;
  for (int64_t i = 0; i < blob.count(); ++i) nonzero += blob.data()[i] != 0;
  EXPECT_NEAR(static_cast<double>(nonzero) / static_cast<double>(blob.count()), 0.25, 0.01);
}

}  // namespace
}  // namespace cgdp
