// Trainer <-> files: checkpoints (parameters, momentum, layer state, iteration, data position)
// and the final parameters in safetensors.
#include <filesystem>

#include "cgdp/io/checkpoint.hpp"
#include "cgdp/io/safetensors.hpp"
#include "cgdp/train/trainer.hpp"

namespace cgdp {

namespace {

CheckpointTensor tensor_of(const Blob<float>& blob, const float* values) {
  return {blob.shape(), std::vector<float>(values, values + blob.count())};
}

// Copies a checkpoint tensor into `dst`, checking it exists and has `blob`'s shape.
void restore(const Checkpoint& c, const std::string& key, const Blob<float>& blob, float* dst,
             const std::string& path) {
  auto it = c.tensors.find(key);
  if (it == c.tensors.end()) throw IoError(cat(path, ": checkpoint has no tensor '", key, "'"));
  if (it->second.shape != blob.shape())
    throw IoError(cat(path, ": tensor '", key, "' has shape ", shape_string(it->second.shape),
                      ", the model expects ", shape_string(blob.shape())));
  std::copy(it->second.values.begin(), it->second.values.end(), dst);
}

}  // namespace

std::string Trainer::write_snapshot() {
  Checkpoint c;
  c.model_fingerprint = net_->fingerprint();
  c.iteration = solver_->iteration();
  const SamplerPosition pos = loader_->position();
  c.epoch = pos.epoch;
  c.offset = pos.offset;
  c.seed = static_cast<int64_t>(config_.seed);
  const auto history = solver_->history();
  for (const ParamSlot& s : net_->param_slots()) {
    const Blob<float>& blob = *net_->layer(s.layer).params()[s.index];
    const std::string& layer = net_->layer(s.layer).name();
    c.tensors[param_key(layer, s.index)] = tensor_of(blob, blob.data());
    c.tensors[history_key(layer, s.index)] = tensor_of(blob, history.data() + s.offset);
  }
  for (int i = 0; i < net_->num_layers(); ++i)
    for (size_t k = 0; k < net_->layer(i).state().size(); ++k) {
      const Blob<float>& blob = *net_->layer(i).state()[k];
      c.tensors[state_key(net_->layer(i).name(), static_cast<int>(k))] = tensor_of(blob, blob.data());
    }
  const std::string prefix = config_.snapshot_prefix.empty() ? net_->name() : config_.snapshot_prefix;
  const std::string path = cat(prefix, "_iter_", c.iteration, ".ckpt");
  if (auto dir = std::filesystem::path(path).parent_path(); !dir.empty())
    std::filesystem::create_directories(dir);
  save_checkpoint(path, c);
  return path;
}

void Trainer::resume(const std::string& path) {
  const Checkpoint c = load_checkpoint(path);
  check_compatible(c, net_->fingerprint(), path);
  auto history = solver_->history();
  for (const ParamSlot& s : net_->param_slots()) {
    Blob<float>& blob = *net_->layer(s.layer).params()[s.index];
    const std::string& layer = net_->layer(s.layer).name();
    restore(c, param_key(layer, s.index), blob, blob.mutable_data(), path);
    restore(c, history_key(layer, s.index), blob, history.data() + s.offset, path);
  }
  for (int i = 0; i < net_->num_layers(); ++i)
    for (size_t k = 0; k < net_->layer(i).state().size(); ++k) {
      Blob<float>& blob = *net_->layer(i).state()[k];
      restore(c, state_key(net_->layer(i).name(), static_cast<int>(k)), blob, blob.mutable_data(), path);
    }
  solver_->set_iteration(c.iteration);
  start_position_ = {c.epoch, c.offset};
  if (static_cast<uint64_t>(c.seed) != config_.seed) {
    std::fprintf(out_, "cgdp: resuming with the checkpoint's seed %lld (not %llu)\n",
                 static_cast<long long>(c.seed), static_cast<unsigned long long>(config_.seed));
    config_.seed = static_cast<uint64_t>(c.seed);
  }
  std::fprintf(out_, "cgdp: resumed from %s at iteration %lld\n", path.c_str(),
               static_cast<long long>(c.iteration));
}

void Trainer::save_parameters(const std::string& path) {
  TensorRefs tensors;
  for (const ParamSlot& s : net_->param_slots()) {
    const Blob<float>& blob = *net_->layer(s.layer).params()[s.index];
    tensors.emplace(s.name, TensorRef::of(blob.data_span(), blob.shape()));
  }
  for (int i = 0; i < net_->num_layers(); ++i)
    for (size_t k = 0; k < net_->layer(i).state().size(); ++k) {
      const Blob<float>& blob = *net_->layer(i).state()[k];
      tensors.emplace(cat(net_->layer(i).name(), "/state/", k), TensorRef::of(blob.data_span(), blob.shape()));
    }
  save_safetensors(path, tensors, {{"format", "cgdp-parameters"}, {"model", net_->name()},
                                   {"iterations", std::to_string(solver_->iteration())}});
  std::fprintf(out_, "cgdp: wrote parameters to %s\n", path.c_str());
}

}  // namespace cgdp
