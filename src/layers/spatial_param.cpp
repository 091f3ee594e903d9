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

ConvGeometry kernel_geometry(const proto::ConvolutionParameter& p) {
  auto given = [](const auto& field) { return std::span<const uint32_t>(field.data(), static_cast<size_t>(field.size())); };
  const SpatialPair kernel = spatial_setting(given(p.kernel_size()), p.has_kernel_h(), p.kernel_h(),
                                             p.has_kernel_w(), p.kernel_w(), 0, "kernel_size");
  const SpatialPair pad = spatial_setting(given(p.pad()), p.has_pad_h(), p.pad_h(), p.has_pad_w(), p.pad_w(), 0, "pad");
  const SpatialPair stride = spatial_setting(given(p.stride()), p.has_stride_h(), p.stride_h(), p.has_stride_w(),
                                             p.stride_w(), 1, "stride");
  const SpatialPair dilation = spatial_setting(given(p.dilation()), false, 0, false, 0, 1, "dilation");
  if (kernel[0] <= 0 || kernel[1] <= 0) throw Error("needs a kernel size: kernel_size, or kernel_h and kernel_w (all > 0)");
  if (stride[0] <= 0 || stride[1] <= 0) throw Error("stride must be > 0");
  if (dilation[0] <= 0 || dilation[1] <= 0) throw Error("dilation must be > 0");
  ConvGeometry g;
  g.kernel_h = kernel[0], g.kernel_w = kernel[1];
  g.pad_h = pad[0], g.pad_w = pad[1];
  g.stride_h = stride[0], g.stride_w = stride[1];
  g.dilation_h = dilation[0], g.dilation_w = dilation[1];
  return g;
}

}  // namespace cgdp
