// Weights files read into blobs by layer name, before any net exists: Caffe's .caffemodel (a
// binary NetParameter, V1 or current), cgdp's checkpoints and safetensors (cgdp's --save, or
// PyTorch's state_dict through a name map). weights.hpp copies them into a net.
#pragma once

#include <map>
#include <string>
#include <vector>

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
StoredWeights read_weights_file(const std::string& path,
                                const std::map<std::string, std::string>& name_map = {});
// The same on a file's bytes already read; `path` names it in errors.
StoredWeights weights_file_contents(std::string bytes, const std::string& path,
                                    const std::map<std::string, std::string>& name_map = {});

// A --weights-map file: lines "tensor_name layer/index" ('#' starts a comment). IoError or
// UsageError with file:line for anything else.
std::map<std::string, std::string> read_weights_map(const std::string& path);

}  // namespace cgdp
