// Reading Caffe's 2-D window settings (kernel, pad, stride, dilation), which a model file gives
// either as one field for both axes or as separate _h and _w fields.
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "cgdp.pb.h"
#include "cgdp/layers/im2col.hpp"

namespace cgdp {

using SpatialPair = std::array<int64_t, 2>;  // {h, w}

// `values` holds the plain field: empty (not given), one value for both axes, or {h, w}; has_h,
// h, has_w, w are the _h/_w fields. Returns `fallback` for both axes when nothing is given.
// Throws Error (which Layer::setup turns into a ModelError naming the layer) when both forms
// are given, only one of _h/_w is, or `values` has more than two entries.
SpatialPair spatial_setting(std::span<const uint32_t> values, bool has_h, uint32_t h, bool has_w,
                            uint32_t w, int64_t fallback, const char* name);

// A convolution_param's kernel, pad, stride and dilation (Convolution and Deconvolution read the
// same fields); the image's channels and size are left for the layer. Throws Error as above, and
// for a kernel, stride or dilation that is not positive.
ConvGeometry kernel_geometry(const proto::ConvolutionParameter& p);

}  // namespace cgdp
