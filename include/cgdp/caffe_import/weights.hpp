// Trained weights from other files (stored_weights.hpp reads them) into a net, by layer name, as
// Caffe's -weights does. And the way back: a net's weights as a .caffemodel or safetensors.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "cgdp/caffe_import/stored_weights.hpp"
#include "cgdp/net/net.hpp"

namespace cgdp {

// What load_weights did.
struct WeightsReport {
  int loaded = 0;       // layers whose blobs were all copied
  int mismatched = 0;   // layers left as their fillers made them (--weights-allow-mismatch)
  std::vector<std::string> missing;  // layers with parameters that no file named
  std::vector<std::string> unused;   // layers of the files the net does not have
  std::string summary() const;       // one line
};

// Copies every stored layer's blobs into the layer of the same name: parameters, or a BatchNorm's
// statistics. A shape that differs (Caffe's 4-D legacy shapes compare by their trailing axes) is
// a ModelError naming the layer, both shapes and the file, unless `allow_mismatch`, which leaves
// that layer as initialised and counts it. Later files win over earlier ones. Files that hold no
// layer of the net (another model's, an empty one) are a ModelError naming what they hold, unless
// `allow_mismatch`.
WeightsReport load_weights(Net<float>& net, const std::vector<StoredWeights>& files, bool allow_mismatch);

// The net's parameters and BatchNorm statistics as a .caffemodel (layer names and types, blobs with
// shapes), written atomically.
void write_caffemodel(Net<float>& net, const std::string& path);

// The same as cgdp's safetensors: "<layer>/<index>" parameters, "<layer>/state/<index>" layer
// state, with `metadata`; written atomically. read_weights_file reads it back.
void write_parameters_safetensors(Net<float>& net, const std::string& path, const std::map<std::string, std::string>& metadata);

}  // namespace cgdp
