// Weights into a net by layer name, and a net's weights out as .caffemodel or safetensors.
#include "cgdp/caffe_import/weights.hpp"

#include <algorithm>
#include <cmath>

#include "cgdp/core/error.hpp"
#include "cgdp/io/file.hpp"
#include "cgdp/io/safetensors.hpp"

namespace cgdp {

namespace {

// Caffe compares a stored 4-D legacy shape with the target's by padding the target with leading
// 1s (an InnerProduct's 1 x 1 x N x K weights fit N x K).
bool shapes_fit(const Shape& stored, const Shape& target) {
  if (stored == target) return true;
  if (stored.size() != 4 || target.size() > 4) return false;
  Shape padded(4 - target.size(), 1);
  padded.insert(padded.end(), target.begin(), target.end());
  return padded == stored;
}

// A NaN or infinite weight trains to a NaN loss, or hides behind a ReLU and tests as "accuracy 1".
void check_finite(const StoredBlob& blob, const StoredWeights& file, const Layer<float>& layer,
                  size_t b) {
  const auto bad = std::find_if(blob.values.begin(), blob.values.end(),
                                [](float v) { return !std::isfinite(v); });
  if (bad != blob.values.end())
    throw ModelError(cat(file.source, ": layer '", layer.name(), "' blob ", b, " holds ", *bad,
                         " at element ", bad - blob.values.begin(),
                         ": a diverged or damaged file (cgdp starts from finite weights)"));
}

// The blobs a file's layer fills: its parameters, or, without any, its state (BatchNorm's).
Layer<float>::Blobs& target_blobs(Layer<float>& layer) {
  return layer.params().empty() ? layer.state() : layer.params();
}

}  // namespace

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
    for (size_t b = 0; problem.empty() && b < targets.size(); ++b)
      check_finite((*blobs)[b], *file, layer, b);
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
