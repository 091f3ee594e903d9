// Weights by layer name: .caffemodel and safetensors in, .caffemodel out.
#include "cgdp/caffe_import/weights.hpp"

#include <charconv>
#include <cstring>
#include <fstream>
#include <sstream>

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
  if (b.data_size() > 0) out.values.assign(b.data().begin(), b.data().end());
  else out.values.assign(b.double_data().begin(), b.double_data().end());
  if (static_cast<int64_t>(out.values.size()) != count_of(out.shape))
    throw ModelError(cat(where, ": a blob of shape ", shape_string(out.shape), " holds ", out.values.size(),
                         " values"));
  return out;
}

// Caffe compares a stored 4-D legacy shape with the target's by padding the target with leading
// 1s (an InnerProduct's 1 x 1 x N x K weights fit N x K).
bool shapes_fit(const Shape& stored, const Shape& target) {
  if (stored == target) return true;
  if (stored.size() != 4 || target.size() > 4) return false;
  Shape padded(4 - target.size(), 1);
  padded.insert(padded.end(), target.begin(), target.end());
  return padded == stored;
}

// "inception_3a/1x1/0" -> ("inception_3a/1x1", 0, param); ".../state/2" -> state 2.
struct BlobName {
  std::string layer;
  int index = 0;
};
bool parse_blob_name(const std::string& name, BlobName& out) {
  const size_t slash = name.rfind('/');
  if (slash == std::string::npos || slash == 0) return false;
  const std::string index = name.substr(slash + 1);
  const auto [end, error] = std::from_chars(index.data(), index.data() + index.size(), out.index);
  if (error != std::errc() || end != index.data() + index.size() || out.index < 0) return false;
  out.layer = name.substr(0, slash);
  if (out.layer.ends_with("/state")) out.layer.resize(out.layer.size() - 6);
  return true;
}

void put(StoredWeights& w, const BlobName& n, StoredBlob blob) {
  auto& blobs = w.layers[n.layer];
  if (blobs.size() <= static_cast<size_t>(n.index)) blobs.resize(static_cast<size_t>(n.index) + 1);
  blobs[static_cast<size_t>(n.index)] = std::move(blob);
}

// The blobs a file's layer fills: its parameters, or, without any, its state (BatchNorm's).
Layer<float>::Blobs& target_blobs(Layer<float>& layer) {
  return layer.params().empty() ? layer.state() : layer.params();
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
StoredWeights safetensors_weights(const SafetensorsFile& file, const std::map<std::string, std::string>& name_map) {
  const std::string& path = file.source();
  StoredWeights w;
  w.source = path;
  for (const auto& [name, entry] : file.tensors()) {
    std::string target = name;
    if (!name_map.empty()) {
      const auto it = name_map.find(name);
      if (it == name_map.end())
        throw UsageError(cat(path, ": tensor '", name, "' is not in the weights map (map it to a layer/index, "
                                                   "or drop it from the file)"));
      target = it->second;
    }
    BlobName parsed;
    if (!parse_blob_name(target, parsed) && !(name_map.empty() && parse_blob_name(pytorch_blob_name(name), parsed)))
      throw UsageError(cat(path, ": tensor '", name, "' is named neither <layer>/<index> (cgdp's --save) nor "
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
    for (const auto& b : layer.blobs()) blobs.push_back(stored_blob(b, cat(path, ": layer '", layer.name(), "'")));
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
      throw UsageError(cat(path, ":", number, ": expected \"tensor_name layer/index\" (e.g. \"features.0.weight "
                                              "conv1/0\"), got \"", line, "\""));
    if (!map.emplace(from, to).second)
      throw UsageError(cat(path, ":", number, ": tensor '", from, "' is mapped twice"));
  }
  return map;
}

StoredWeights read_safetensors_weights(const std::string& path, const std::map<std::string, std::string>& name_map) {
  return safetensors_weights(load_safetensors(path), name_map);
}


StoredWeights read_weights_file(const std::string& path, const std::map<std::string, std::string>& name_map) {
  std::string bytes = read_file(path);
  // safetensors: an 8-byte header length, then the JSON header; a NetParameter never starts so.
  const bool safetensors = bytes.size() > 9 && bytes[8] == '{';
  if (!safetensors) {
    if (!name_map.empty())
      throw UsageError(cat(path, ": --weights-map renames safetensors tensors; a .caffemodel's layers "
                                 "keep their names"));
    return caffemodel_weights(bytes, path);
  }
  SafetensorsFile file(std::move(bytes), path);
  const auto format = file.metadata().find("format");
  if (format == file.metadata().end() || format->second != "cgdp-checkpoint") return safetensors_weights(file, name_map);
  check_checkpoint_file(file);  // a damaged checkpoint loads no more as weights than on --resume
  StoredWeights w;  // a checkpoint: its parameters and layer state, not its solver history
  w.source = path;
  for (const auto& [name, entry] : file.tensors()) {
    const bool param = name.starts_with("param/"), state = name.starts_with("state/");
    BlobName parsed;
    if ((param || state) && parse_blob_name(name.substr(6), parsed)) put(w, parsed, {entry.shape, file.values<float>(name)});
  }
  return w;
}

std::string WeightsReport::summary() const {
  std::string line = cat("weights: ", loaded, " layer", loaded == 1 ? "" : "s", " loaded");
  if (mismatched) line += cat(", ", mismatched, " re-initialised (shapes differ)");
  line += cat(", ", missing.size(), " initialised by their fillers");
  if (!missing.empty()) {
    line += " (";
    for (size_t i = 0; i < missing.size() && i < 5; ++i) line += cat(i ? ", " : "", missing[i]);
    line += missing.size() > 5 ? ", ...)" : ")";
  }
  if (!unused.empty()) line += cat(", ", unused.size(), " in the files but not in the net");
  return line;
}

namespace {

std::string sources(const std::vector<StoredWeights>& files) {
  std::string out;
  for (const StoredWeights& f : files) out += cat(out.empty() ? "" : ", ", f.source);
  return out;
}

// "the files hold no layer" or "the files hold 3 layers, the first 'ip1'", for a refusal.
template <typename Map>
std::string stored_summary(const Map& stored) {
  if (stored.empty()) return "the file holds no layer";
  return cat("the file holds ", stored.size(), " layer", stored.size() == 1 ? "" : "s",
             ", the first '", stored.begin()->first, "'");
}

}  // namespace

WeightsReport load_weights(Net<float>& net, const std::vector<StoredWeights>& files, bool allow_mismatch) {
  std::map<std::string, std::pair<const StoredWeights*, const std::vector<StoredBlob>*>> stored;
  for (const StoredWeights& f : files)
    for (const auto& [layer, blobs] : f.layers) stored[layer] = {&f, &blobs};
  WeightsReport report;
  std::map<std::string, bool> matched;
  for (int i = 0; i < net.num_layers(); ++i) {
    Layer<float>& layer = net.layer(i);
    auto& targets = target_blobs(layer);
    if (targets.empty()) continue;
    const auto it = stored.find(layer.name());
    if (it == stored.end()) {
      report.missing.push_back(layer.name());
      continue;
    }
    matched[layer.name()] = true;
    const auto& [file, blobs] = it->second;
    std::string problem;
    if (blobs->size() != targets.size())
      problem = cat(file->source, " holds ", blobs->size(), " blobs for layer '", layer.name(), "' (",
                    layer.type(), "), which has ", targets.size());
    for (size_t b = 0; problem.empty() && b < targets.size(); ++b)
      if (!shapes_fit((*blobs)[b].shape, targets[b]->shape()))
        problem = cat("layer '", layer.name(), "' blob ", b, ": ", file->source, " holds ",
                      shape_string((*blobs)[b].shape), ", the net has ", shape_string(targets[b]->shape()));
    if (!problem.empty()) {
      if (!allow_mismatch)
        throw ModelError(cat(problem, " (--weights-allow-mismatch re-initialises such layers, as when "
                                      "fine-tuning with a renamed last layer)"));
      ++report.mismatched;
      continue;
    }
    for (size_t b = 0; b < targets.size(); ++b)
      net.device().copy(targets[b]->mutable_data(), (*blobs)[b].values.data(), (*blobs)[b].values.size() * sizeof(float));
    ++report.loaded;
  }
  for (const auto& [layer, _] : stored)
    if (!matched.count(layer)) report.unused.push_back(layer);
  if (report.loaded == 0 && !report.missing.empty() && !allow_mismatch)
    throw ModelError(cat(sources(files), ": no layer of the net '", net.name(), "' is in ",
                         files.size() == 1 ? "it" : "them", " (", report.missing.size(),
                         " layers with parameters, the first '", report.missing.front(), "'; ",
                         stored_summary(stored), "): these are not its weights ",
                         "(--weights-allow-mismatch trains from the fillers anyway)"));
  return report;
}

void write_parameters_safetensors(Net<float>& net, const std::string& path,
                                  const std::map<std::string, std::string>& metadata) {
  std::map<std::string, StoredBlob> host;  // device memory read back first
  auto read_back = [&](const Blob<float>& blob) {
    StoredBlob b{blob.shape(), std::vector<float>(static_cast<size_t>(blob.count()))};
    net.device().copy(b.values.data(), blob.data(), b.values.size() * sizeof(float));
    return b;
  };
  for (const ParamSlot& s : net.param_slots()) host[s.name] = read_back(*net.layer(s.layer).params()[s.index]);
  for (int i = 0; i < net.num_layers(); ++i)
    for (size_t k = 0; k < net.layer(i).state().size(); ++k)
      host[cat(net.layer(i).name(), "/state/", k)] = read_back(*net.layer(i).state()[k]);
  TensorRefs tensors;
  for (const auto& [name, b] : host) tensors.emplace(name, TensorRef::of(b.values, b.shape));
  save_safetensors(path, tensors, metadata);
}

void write_caffemodel(Net<float>& net, const std::string& path) {
  proto::NetParameter out;
  out.set_name(net.name());
  for (int i = 0; i < net.num_layers(); ++i) {
    Layer<float>& layer = net.layer(i);
    auto& blobs = target_blobs(layer);
    if (blobs.empty()) continue;
    proto::LayerParameter& lp = *out.add_layer();
    lp.set_name(layer.name());
    lp.set_type(layer.type());
    for (const auto& blob : blobs) {
      proto::BlobProto& b = *lp.add_blobs();
      for (int64_t d : blob->shape()) b.mutable_shape()->add_dim(d);
      std::vector<float> host(static_cast<size_t>(blob->count()));
      net.device().copy(host.data(), blob->data(), host.size() * sizeof(float));
      b.mutable_data()->Assign(host.begin(), host.end());
    }
  }
  write_file_atomically(path, out.SerializeAsString());
}

}  // namespace cgdp
