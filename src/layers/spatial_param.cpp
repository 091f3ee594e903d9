// Caffe's rules for 2-D window settings, shared by Convolution and Pooling.
#include "cgdp/layers/spatial_param.hpp"

#include "cgdp/core/error.hpp"

namespace cgdp {

SpatialPair spatial_setting(std::span<const uint32_t> values, bool has_h, uint32_t h, bool has_w,
                            uint32_t w, int64_t fallback, const char* name) {
  // Caffe's per-axis fields drop "_size": kernel_size has kernel_h and kernel_w.
  std::string axis = name;
  if (axis.ends_with("_size")) axis.resize(axis.size() - 5);
  if (has_h || has_w) {
    if (!values.empty())
      throw Error(cat("give either ", name, " or ", axis, "_h and ", axis, "_w, not both"));
    if (!has_h || !has_w) throw Error(cat("give both ", axis, "_h and ", axis, "_w"));
    return {h, w};
  }
  if (values.empty()) return {fallback, fallback};
  if (values.size() > 2)
    throw Error(cat(name, " is given ", values.size(),
                    " times; give it once, or once per spatial axis (2)"));
  return {values.front(), values.back()};
}

}  // namespace cgdp
