// Trained weights from other files into a net, by layer name, as Caffe's -weights does: Caffe's
// .caffemodel (a binary NetParameter, V1 or current) and safetensors (cgdp's --save, or
// PyTorch's state_dict through a name map). And the way back: a net's weights as a .caffemodel.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "cgdp/net/net.hpp"
#include "cgdp/tensor/shape.hpp"

namespace cgdp {

// One blob as a weights file holds it.
struct StoredBlob {
  Shape shape;
  std::vector<float> values;
};

// The blobs of each layer, by layer name, in the layer's order (weights, then bias; BatchNorm's
// mean, variance and factor), and the file they came from.
struct StoredWeights {
  std::string source;
  std::map<std::string, std::vector<StoredBlob>> layers;
};

// A .caffemodel's layers that hold blobs. Throws ModelError naming the file when it is not one.
StoredWeights read_caffemodel(const std::string& path);
StoredWeights caffemodel_weights(const std::string& bytes, const std::string& path);

// A safetensors file: cgdp's own names ("<layer>/<index>", and "state/<layer>/<index>" for
// BatchNorm statistics), or, with `name_map` (tensor name -> "<layer>/<index>"), any other. A
// tensor the map does not name is an error (a typo in the map would otherwise load nothing).
StoredWeights read_safetensors_weights(const std::string& path,
                                       const std::map<std::string, std::string>& name_map = {});

// Any weights file, told apart by its bytes: a .caffemodel, a cgdp checkpoint (.ckpt: its
// parameters and layer state), or other safetensors (read as read_safetensors_weights does).
StoredWeights read_weights_file(const std::string& path, const std::map<std::string, std::string>& name_map = {});

// A --weights-map file: lines "tensor_name layer/index" ('#' starts a comment). IoError or
// UsageError with file:line for anything else.
std::map<std::string, std::string> read_weights_map(const std::string& path);

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
