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

// Layer types that read their samples from a source (Data, ImageData, HDF5Data, DummyData): no
// layer is built for them; the trainer opens them as datasets (caffe_import/data_layers.hpp) and
// the net sees an Input in their place.
bool is_data_layer_type(const std::string& type);

}  // namespace cgdp
