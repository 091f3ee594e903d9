// Errors that name a layer the way Layer::fail does, for helpers that several layers share.
#pragma once

#include <string>

#include "cgdp/layers/layer.hpp"

namespace cgdp {

// Throws E with "layer 'name' (Type): what".
template <typename E, typename T>
[[noreturn]] void throw_layer_error(const Layer<T>& layer, const std::string& what) {
  throw E(cat("layer '", layer.name(), "' (", layer.type(), "): ", what));
}

// canonical_axis(), but the error names the layer (reshape runs outside setup()'s wrapping).
template <typename T>
int layer_axis(const Layer<T>& layer, const Shape& shape, int axis) {
  const int n = static_cast<int>(shape.size());
  if (axis < -n || axis >= n)
    throw_layer_error<ModelError>(
        layer, cat("axis ", axis, " is out of range for bottom shape ", shape_string(shape)));
  return axis < 0 ? axis + n : axis;
}

}  // namespace cgdp
