// A float convolution on the CPU by oneDNN's JIT kernels, the CPU counterpart of the cuDNN path:
// weights stay in Caffe's [num_output, C / group, kh, kw] outside, activations in NCHW or in the
// channel block the net chose for them; oneDNN picks its layouts inside, and reorders happen at
// the edges of each call only where the two differ.
#pragma once

#include <cstdint>
#include <memory>

#include "cgdp/layers/im2col.hpp"

namespace cgdp {

// Below this many input channels per group the layer keeps im2col + GEMM.
inline constexpr int64_t kOneDnnMinChannels = 8;

struct OneDnnShape {
  int64_t batch = 0;
  ConvGeometry geometry;  // channels, height and width are the bottom's
  int64_t num_output = 0, group = 1;
  bool bias = true;
  bool relu = false;  // an absorbed ReLU: applied to the output, and to the gradient in backward
  // bf16 multiplies: the input, weights and output gradient are rounded to bfloat16 inside (on
  // the AVX512_BF16 instructions where the CPU has them); sums, outputs and gradients stay fp32.
  bool bf16 = false;
  // The caller's bottom and top layouts (tensor/channel_blocks.hpp): 1 is NCHW.
  int64_t src_block = 1, dst_block = 1;
  bool operator==(const OneDnnShape&) const = default;
};

class OneDnnConvolution {
 public:
  // Builds (JIT-compiles) the primitives; null when oneDNN has no implementation for the shape.
  static std::unique_ptr<OneDnnConvolution> create(const OneDnnShape& shape);
  // The channel blocks of the input and output that oneDNN's forward kernel for `shape` reads
  // and writes (1 when it wants a layout no channel block describes, or has no kernel).
  struct Blocks {
    int64_t src = 1, dst = 1;
  };
  static Blocks preferred_blocks(const OneDnnShape& shape);
  ~OneDnnConvolution();
  const OneDnnShape& shape() const;

  // out = conv(in, weight) + bias (then max(0, .) with relu). `bias` is null without a bias.
  void forward(const float* in, const float* weight, const float* bias, float* out);
  // With relu and `out`, first zeroes out_diff where out is not positive (in place, as the ReLU
  // layer's backward would); a null `out`: the caller did. `in_packed` (bf16 shapes): the input's
  // bf16 copy in the caller's layout, read instead of `in`. Adds the weight and bias gradients to
  // weight_diff and bias_diff (bias_diff null without a bias) and overwrites in_diff unless it is
  // null.
  void backward(const float* in, const float* weight, const float* out, float* out_diff,
                float* weight_diff, float* bias_diff, float* in_diff,
                const uint16_t* in_packed = nullptr);

 private:
  explicit OneDnnConvolution(const OneDnnShape& shape);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace cgdp
