// InnerProduct's bf16 kernels on the CPU (issue 36): oneDNN's inner products on AVX512_BF16 (AMX
// where the CPU has it) multiply the input, weights and output gradient in bf16 with fp32 sums.
// The layer keeps fp32 buffers in Caffe's layouts; the rounding happens in the reorders at the
// edges of each call. fp32 runs stay on OpenBLAS (inner_product_layer.cpp).
#pragma once

#include <cstdint>
#include <memory>

namespace cgdp {

struct OneDnnInnerProductShape {
  int64_t rows = 0, inputs = 0, outputs = 0;  // M, K, N
  bool transpose = false;                     // weights [K, N] instead of [N, K]
  // Without transpose, the weight is multiplied in slices as the layer cuts it
  // (weight_slices.hpp): rows of W for the output and the weight gradient, columns for the
  // input gradient; 0 means whole.
  int64_t slice_rows = 0, slice_columns = 0;
  bool operator==(const OneDnnInnerProductShape&) const = default;
};

class OneDnnInnerProduct {
 public:
  // Builds (JIT-compiles) the primitives; null when oneDNN has no bf16 implementation for them.
  static std::unique_ptr<OneDnnInnerProduct> create(const OneDnnInnerProductShape& shape);
  ~OneDnnInnerProduct();
  const OneDnnInnerProductShape& shape() const;

  // out [M, N] = in [M, K] * W^T (bias added by the caller).
  // With a `stage` (a streamed weight, Blob::on_host: `weight` and `weight_diff` in host memory),
  // each slice of the weight is narrowed into the stage and each slice of its gradient passes
  // through it; the stage holds a slice of fp32 rows or columns (the layer's). The multiplies
  // are the resident weight's, slice for slice, so the bits are too.
  void forward(const float* in, const float* weight, float* out, float* stage = nullptr);
  // weight_diff += out_diff^T * in (Caffe accumulates) unless weight_diff is null (the factors
  // leave instead); in_diff [M, K] = out_diff * W unless in_diff is null.
  void backward(const float* in, const float* weight, const float* out_diff, float* weight_diff,
                float* in_diff, float* stage = nullptr);

 private:
  explicit OneDnnInnerProduct(const OneDnnInnerProductShape& shape);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace cgdp
