// Reading Caffe's 2-D window settings (kernel, pad, stride, dilation), which a model file gives
// either as one field for both axes or as separate _h and _w fields.
#pragma once

#include <array>
#include <cstdint>
#include <span>

namespace cgdp {

using SpatialPair = std::array<int64_t, 2>;  // {h, w}

// `values` holds the plain field: empty (not given), one value for both axes, or {h, w}; has_h,
// h, has_w, w are the _h/_w fields. Returns `fallback` for both axes when nothing is given.
// Throws Error (which Layer::setup turns into a ModelError naming the layer) when both forms
// are given, only one of _h/_w is, or `values` has more than two entries.
SpatialPair spatial_setting(std::span<const uint32_t> values, bool has_h, uint32_t h, bool has_w,
                            uint32_t w, int64_t fallback, const char* name);

}  // namespace cgdp
