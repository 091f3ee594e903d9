// Max pooling's argmax as an output keeps it for backward: the maximum's place in the output's own
// window, (h - h0) * kernel_w + (w - w0) from the window's corner (h0, w0) before clipping, not its
// position in the plane. A window of up to 254 elements (Caffe's nets: 2x2, 3x3) takes a byte per
// output where a position took four; up to 65,534 two; else four. kNone: no element beat -max
// (all -inf or NaN), as the position -1 was.
// nvcc compiles this header too: plain C++17, no cgdp headers.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define CGDP_POOL_FN __host__ __device__
#else
#define CGDP_POOL_FN
#endif

namespace cgdp::pool {

struct CodeGeometry {
  int64_t width = 0;  // the input plane's
  int64_t kernel_h = 0, kernel_w = 0, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
};

template <typename Code>
inline constexpr Code kNone = static_cast<Code>(~Code(0));

// Bytes per code for a window of `kernel_area` elements.
inline int code_bytes(int64_t kernel_area) {
  return kernel_area < 255 ? 1 : kernel_area < 65535 ? 2 : 4;
}

// Input (h, w) as output (ph, pw)'s code.
template <typename Code>
CGDP_POOL_FN Code encode(int64_t h, int64_t w, int64_t ph, int64_t pw, const CodeGeometry& g) {
  return static_cast<Code>((h - (ph * g.stride_h - g.pad_h)) * g.kernel_w +
                           (w - (pw * g.stride_w - g.pad_w)));
}

// The row of `offset`, a place counted from a window's corner in rows of `row` elements whose
// column is below `row`: compares, not a 64-bit division per output, for Caffe's small kernels
// (kernel_h 0: not known, divide).
CGDP_POOL_FN inline int64_t window_row(int64_t offset, int64_t row, int64_t kernel_h) {
  if (kernel_h <= 0 || kernel_h > 8) return offset / row;
  int64_t rows = 0;
  for (int64_t k = 1; k < kernel_h; ++k) rows += offset >= k * row;
  return rows;
}

// A position in the plane (h * width + w; -1: none) as output (ph, pw)'s code.
template <typename Code>
CGDP_POOL_FN Code encode_position(int64_t position, int64_t ph, int64_t pw, const CodeGeometry& g) {
  if (position < 0) return kNone<Code>;
  if (g.kernel_w > g.width)  // a padded window wider than the plane: its column may pass width
    return encode<Code>(position / g.width, position % g.width, ph, pw, g);
  const int64_t offset =
      position - ((ph * g.stride_h - g.pad_h) * g.width + pw * g.stride_w - g.pad_w);
  const int64_t dh = window_row(offset, g.width, g.kernel_h);
  return static_cast<Code>(dh * g.kernel_w + offset - dh * g.width);
}

// Output (ph, pw)'s code as the position in the plane; -1 for kNone.
template <typename Code>
CGDP_POOL_FN int64_t decode(Code code, int64_t ph, int64_t pw, const CodeGeometry& g) {
  if (code == kNone<Code>) return -1;
  const int64_t dh = window_row(code, g.kernel_w, g.kernel_h), dw = code - dh * g.kernel_w;
  return (ph * g.stride_h - g.pad_h + dh) * g.width + (pw * g.stride_w - g.pad_w + dw);
}

}  // namespace cgdp::pool
