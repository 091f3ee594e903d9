// im2col / col2im: unfold image patches into the columns of a matrix so that a convolution is one
// GEMM, and fold column gradients back onto the image.
#pragma once

#include <cstdint>

namespace cgdp {

// Geometry of a 2-D convolution window sliding over one image of `channels` planes.
struct ConvGeometry {
  int64_t channels = 0, height = 0, width = 0;
  int64_t kernel_h = 1, kernel_w = 1;
  int64_t pad_h = 0, pad_w = 0;
  int64_t stride_h = 1, stride_w = 1;
  int64_t dilation_h = 1, dilation_w = 1;
  bool operator==(const ConvGeometry&) const = default;

  // Extent of the dilated kernel: d * (k - 1) + 1.
  int64_t extent_h() const { return dilation_h * (kernel_h - 1) + 1; }
  int64_t extent_w() const { return dilation_w * (kernel_w - 1) + 1; }
  int64_t out_h() const { return (height + 2 * pad_h - extent_h()) / stride_h + 1; }
  int64_t out_w() const { return (width + 2 * pad_w - extent_w()) / stride_w + 1; }
  // Rows of the column matrix (channels * kernel_h * kernel_w).
  int64_t col_rows() const { return channels * kernel_h * kernel_w; }
  bool padded() const { return pad_h > 0 || pad_w > 0; }
  // Elements of the zero-padded copy of one image that im2col/col2im work on (0 if no padding).
  int64_t scratch_count() const {
    return padded() ? channels * (height + 2 * pad_h) * (width + 2 * pad_w) : 0;
  }
  // A 1x1 kernel with stride 1 and no padding: the image already is the column matrix.
  bool is_pointwise() const {
    return kernel_h == 1 && kernel_w == 1 && pad_h == 0 && pad_w == 0 && stride_h == 1 &&
           stride_w == 1;
  }
};

// col[(c * kernel_h + i) * kernel_w + j][oh * out_w + ow] =
//   im[c][oh * stride_h - pad_h + i * dilation_h][ow * stride_w - pad_w + j * dilation_w],
// zero where that pixel lies in the padding. `scratch` holds g.scratch_count() elements.
template <typename T>
void im2col(const T* im, const ConvGeometry& g, T* col, T* scratch);

// The adjoint of im2col: each pixel of `im` becomes the sum of the column entries that read it
// (overwrites `im`). `scratch` holds g.scratch_count() elements.
template <typename T>
void col2im(const T* col, const ConvGeometry& g, T* im, T* scratch);

}  // namespace cgdp
