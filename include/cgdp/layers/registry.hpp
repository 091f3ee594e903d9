// The one place where layer type names map to classes. An unknown type lists the known ones.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cgdp/layers/layer.hpp"

namespace cgdp {

template <typename T>
std::unique_ptr<Layer<T>> create_layer(const proto::LayerParameter& param, Device& device);

// Sorted names of every registered layer type.
std::vector<std::string> known_layer_types();

}  // namespace cgdp
