// Weights files to blobs by layer name: .caffemodel, cgdp checkpoints and safetensors.
#include "cgdp/caffe_import/stored_weights.hpp"

#include <charconv>
#include <cstring>
#include <sstream>

#include "cgdp.pb.h"
#include "cgdp/caffe_import/net_import.hpp"
#include "cgdp/core/error.hpp"
#include "cgdp/io/checkpoint.hpp"
#include "cgdp/io/file.hpp"
#include "cgdp/io/safetensors.hpp"

namespace cgdp {

namespace {

// A BlobProto's shape: `shape`, else Caffe's legacy num/channels/height/width.
Shape blob_shape(const proto::BlobProto& b) {
  if (b.has_shape()) return Shape(b.shape().dim().begin(), b.shape().dim().end());
  return {b.num(), b.channels(), b.height(), b.width()};
}

StoredBlob stored_blob(const proto::BlobProto& b, const std::string& where) {
  StoredBlob out;
  out.shape = blob_shape(b);
  if (b.data_size() > 0)
    out.values.assign(b.data().begin(), b.data().end());
  else
    out.values.assign(b.double_data().begin(), b.double_data().end());
  if (static_cast<int64_t>(out.values.size()) != count_of(out.shape))
    throw ModelError(cat(where, ": a blob of shape ", shape_string(out.shape), " holds ",
                         out.values.size(), " values"));
  return out;
}

// "inception_3a/1x1/0" -> ("inception_3a/1x1", 0, param); ".../state/2" -> state 2.
struct BlobName {
  std::string layer;
  int index = 0;
};
constexpr int kMaxBlobIndex = 255;
bool parse_blob_name(const std::string& name, BlobName& out) {
  const size_t slash = name.rfind('/');
  if (slash == std::string::npos || slash == 0) return false;
  const std::string index = name.substr(slash + 1);
  const auto [end, error] = std::from_chars(index.data(), index.data() + index.size(), out.index);
  // A layer holds a few blobs (BatchNorm three); the bound keeps "conv1/2000000000" from sizing a
  // vector.
  if (error != std::errc() || end != index.data() + index.size() || out.index < 0 ||
      out.index > kMaxBlobIndex)
    return false;
  out.layer = name.substr(0, slash);
  if (out.layer.ends_with("/state")) out.layer.resize(out.layer.size() - 6);
  return true;
}

void put(StoredWeights& w, const BlobName& n, StoredBlob blob) {
  auto& blobs = w.layers[n.layer];
  if (blobs.size() <= static_cast<size_t>(n.index)) blobs.resize(static_cast<size_t>(n.index) + 1);
  blobs[static_cast<size_t>(n.index)] = std::move(blob);
}

// PyTorch's state_dict name of a convolution's or linear layer's parameter, "<module>.weight" or
// "<module>.bias", as cgdp's "<module>/0" or "<module>/1"; empty for any other name.
std::string pytorch_blob_name(const std::string& name) {
  for (const auto& [suffix, index] : {std::pair{".weight", "/0"}, std::pair{".bias", "/1"}})
    if (name.size() > std::strlen(suffix) && name.ends_with(suffix))
      return name.substr(0, name.size() - std::strlen(suffix)) + index;
  return {};
}

// The tensors of a safetensors file as blobs by layer: see read_safetensors_weights.
StoredWeights safetensors_weights(const SafetensorsFile& file,
                                  const std::map<std::string, std::string>& name_map) {
  const std::string& path = file.source();
  StoredWeights w;
  w.source = path;
  for (const auto& [name, entry] : file.tensors()) {
    std::string target = name;
    if (!name_map.empty()) {
      const auto it = name_map.find(name);
      if (it == name_map.end())
        throw UsageError(cat(path, ": tensor '", name,
                             "' is not in the weights map (map it to a layer/index, "
                             "or drop it from the file)"));
      target = it->second;
    }
    BlobName parsed;
    if (!parse_blob_name(target, parsed) &&
        !(name_map.empty() && parse_blob_name(pytorch_blob_name(name), parsed)))
      throw UsageError(cat(path, ": tensor '", name,
                           "' is named neither <layer>/<index> (cgdp's --save) nor "
                           "<layer>.weight or <layer>.bias (PyTorch's); give --weights-map "
                           "for other names"));
    put(w, parsed, {entry.shape, file.values<float>(name)});
  }
  return w;
}

}  // namespace

StoredWeights read_caffemodel(const std::string& path) {
  return caffemodel_weights(read_file(path), path);
}

StoredWeights caffemodel_weights(const std::string& bytes, const std::string& path) {
  const proto::NetParameter net = import_net_binary(bytes, path);
  StoredWeights w;
  w.source = path;
  for (const auto& layer : net.layer()) {
    if (layer.blobs_size() == 0) continue;
    auto& blobs = w.layers[layer.name()];
    for (const auto& b : layer.blobs())
      blobs.push_back(stored_blob(b, cat(path, ": layer '", layer.name(), "'")));
  }
  return w;
}

std::map<std::string, std::string> read_weights_map(const std::string& path) {
  std::istringstream lines(read_file(path));
  std::map<std::string, std::string> map;
  int number = 0;
  for (std::string line; std::getline(lines, line);) {
    ++number;
    if (const size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream words(line);
    std::string from, to, extra;
    if (!(words >> from)) continue;
    BlobName parsed;
    if (!(words >> to) || (words >> extra) || !parse_blob_name(to, parsed))
      throw UsageError(cat(path, ":", number,
                           ": expected \"tensor_name layer/index\" (e.g. \"features.0.weight "
                           "conv1/0\"; index 0 to ",
                           kMaxBlobIndex, "), got \"", line, "\""));
    if (!map.emplace(from, to).second)
      throw UsageError(cat(path, ":", number, ": tensor '", from, "' is mapped twice"));
  }
  return map;
}

StoredWeights read_safetensors_weights(const std::string& path,
                                       const std::map<std::string, std::string>& name_map) {
  return safetensors_weights(load_safetensors(path), name_map);
}

StoredWeights read_weights_file(const std::string& path,
                                const std::map<std::string, std::string>& name_map) {
  return weights_file_contents(read_file(path), path, name_map);
}

StoredWeights weights_file_contents(std::string bytes, const std::string& path,
                                    const std::map<std::string, std::string>& name_map) {
  // safetensors: an 8-byte header length, then the JSON header; a NetParameter never starts so.
  const bool safetensors = bytes.size() > 9 && bytes[8] == '{';
  if (!safetensors) {
    if (!name_map.empty())
      throw UsageError(cat(path,
                           ": --weights-map renames safetensors tensors; a .caffemodel's layers "
                           "keep their names"));
    return caffemodel_weights(bytes, path);
  }
  SafetensorsFile file(std::move(bytes), path);
  const auto format = file.metadata().find("format");
  if (format == file.metadata().end() || format->second != "cgdp-checkpoint")
    return safetensors_weights(file, name_map);
  check_checkpoint_file(file);  // a damaged checkpoint loads no more as weights than on --resume
  StoredWeights w;  // a checkpoint: its parameters and layer state, not its solver history
  w.source = path;
  for (const auto& [name, entry] : file.tensors()) {
    const bool param = name.starts_with("param/"), state = name.starts_with("state/");
    BlobName parsed;
    if ((param || state) && parse_blob_name(name.substr(6), parsed))
      put(w, parsed, {entry.shape, file.values<float>(name)});
  }
  return w;
}

}  // namespace cgdp
