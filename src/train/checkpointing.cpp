// Trainer <-> files: checkpoints (parameters, momentum, layer state, iteration, data position)
// and the final parameters in safetensors. Worker 0 of rank 0 writes; a resume loads into every
// worker, and every host of a multi-host run loads the same checkpoint (each from its --resume).
#include <filesystem>
#include <utility>
#include <vector>

#include "cgdp/caffe_import/weights.hpp"
#include "cgdp/device/conv_algorithm_table.hpp"
#include "cgdp/io/checkpoint.hpp"
#include "cgdp/io/file.hpp"
#include "cgdp/io/safetensors.hpp"
#include "cgdp/train/trainer.hpp"

namespace cgdp {

namespace {

// Reads `count` floats of device memory (through the device, so it works on every backend).
CheckpointTensor read_tensor(Device& device, const Shape& shape, const float* values) {
  CheckpointTensor t{shape, std::vector<float>(static_cast<size_t>(count_of(shape)))};
  device.copy(t.values.data(), values, t.values.size() * sizeof(float));
  return t;
}

// Writes a checkpoint tensor to device memory, checking it exists and has `shape`.
void write_tensor(const Checkpoint& c, const std::string& key, const Shape& shape, Device& device,
                  float* dst, const std::string& path) {
  auto it = c.tensors.find(key);
  if (it == c.tensors.end())
    throw IoError(cat(path, ": checkpoint has no tensor '", key, "'",
                      key.starts_with("history2/") ? " (it was written by a solver type with one history: "
                                                     "resume with the type that wrote it)" : ""));
  if (it->second.shape != shape)
    throw IoError(cat(path, ": tensor '", key, "' has shape ", shape_string(it->second.shape),
                      ", the model expects ", shape_string(shape)));
  device.copy(dst, it->second.values.data(), it->second.values.size() * sizeof(float));
}

}  // namespace

std::string Trainer::snapshot_path(int64_t iteration) const {
  const std::string prefix =
      config_.snapshot_prefix.empty() ? model_.name() : config_.snapshot_prefix;
  return cat(prefix, "_iter_", iteration, ".ckpt");
}

// No output may name an input (it would be overwritten before, or while, it is read) or another
// output (one of the two would be lost).
void Trainer::check_outputs_apart(const std::string& first_snapshot) const {
  std::vector<std::pair<std::string, std::string>> outputs, inputs = {{"--model", model_path_}};
  for (const auto& [flag, path] :
       {std::pair{"--timeline", config_.timeline_path}, {"--save", config_.save_path},
        {"--metrics", config_.metrics_path}, {"--snapshot-prefix", first_snapshot}})
    if (!path.empty()) outputs.emplace_back(flag, path);
  for (const std::string& w : config_.weights) inputs.emplace_back("--weights", w);
  for (const auto& [flag, path] : {std::pair{"--weights-map", config_.weights_map},
                                   {"--resume", config_.resume_path},
                                   {"--profile", config_.profile_path}})
    if (!path.empty()) inputs.emplace_back(flag, path);
  for (size_t i = 0; i < outputs.size(); ++i) {
    const auto& [flag, path] = outputs[i];
    for (const auto& [input_flag, input] : inputs)
      if (same_file(path, input))
        throw UsageError(cat(flag, " ", path, " is the file ", input_flag,
                             " reads: writing it would overwrite it; give another path"));
    for (size_t j = 0; j < i; ++j)
      if (same_file(path, outputs[j].second))
        throw UsageError(cat(flag, " and ", outputs[j].first, " both name ", path,
                             ": one would overwrite the other; give each its own file"));
  }
}

void Trainer::check_outputs() {
  check_outputs_apart(config_.snapshot_every > 0 || config_.snapshot_after_train
                          ? snapshot_path(0)
                          : std::string());
  if (!config_.timeline_path.empty()) check_writable(config_.timeline_path, "the timeline");
  if (rank() != 0) return;  // rank 0 writes the parameters and the checkpoints
  if (!config_.save_path.empty()) check_writable(config_.save_path, "the parameters (--save)");
  if (!config_.metrics_path.empty())
    check_writable(config_.metrics_path, "the metrics (--metrics)");
  if (config_.snapshot_every <= 0 && !config_.snapshot_after_train) return;
  const std::filesystem::path first = snapshot_path(0);
  const std::filesystem::path dir = first.parent_path();
  if (!dir.empty()) create_directories(dir, "checkpoints (--snapshot-prefix)");
  check_writable(first, "checkpoints (--snapshot-prefix)");
  const std::string stem = first.filename().string();
  if (const int n = remove_stale_temporaries(dir, stem.substr(0, stem.rfind("_iter_") + 6)))
    std::fprintf(out_, "cgdp: removed %d unfinished checkpoint file(s) left in %s\n", n,
                 dir.empty() ? "." : dir.c_str());
}

std::string Trainer::write_snapshot() {
  average_state();
  if (rank() != 0) return "";
  Worker& w = workers_[0];
  Net<float>& n = *w.net;
  Checkpoint c;
  c.model_fingerprint = n.fingerprint();
  c.iteration = iteration();
  const SamplerPosition pos = loader_->position();
  c.epoch = pos.epoch;
  c.offset = pos.offset;
  c.seed = static_cast<int64_t>(config_.seed);
  c.conv_algorithms = ConvAlgorithmTable::process().to_text();
  if (loss_scale_.active()) {
    c.loss_scale = loss_scale_.value();
    c.loss_scale_finite_run = loss_scale_.finite_run();
    c.skipped_steps = loss_scale_.skipped_steps();
  }
  for (const ParamSlot& s : n.param_slots()) {
    const Blob<float>& blob = *n.layer(s.layer).params()[s.index];
    const std::string& layer = n.layer(s.layer).name();
    c.tensors[param_key(layer, s.index)] = read_tensor(*w.device, blob.shape(), blob.data());
    for (int h = 0; h < w.solver->settings().histories(); ++h)
      c.tensors[history_key(layer, s.index, h)] =
          read_tensor(*w.device, blob.shape(), w.solver->history(h).data() + s.offset);
  }
  for (int i = 0; i < n.num_layers(); ++i)
    for (size_t k = 0; k < n.layer(i).state().size(); ++k) {
      const Blob<float>& blob = *n.layer(i).state()[k];
      c.tensors[state_key(n.layer(i).name(), static_cast<int>(k))] =
          read_tensor(*w.device, blob.shape(), blob.data());
    }
  const std::string path = snapshot_path(c.iteration);
  if (auto dir = std::filesystem::path(path).parent_path(); !dir.empty())
    create_directories(dir, "checkpoints (--snapshot-prefix)");  // it may have gone since the start
  save_checkpoint(path, c);
  return path;
}

void Trainer::resume(const std::string& path) {
  const Checkpoint c = load_checkpoint(path);
  check_compatible(c, net().fingerprint(), path);
  // Before any forward: the layers then look up the algorithms the checkpointed run used.
  ConvAlgorithmTable::process().merge_text(c.conv_algorithms, path);
  // A dynamic scale goes on from where it stood; a fixed one is the flag's.
  if (c.loss_scale > 0 && loss_scale_.active()) {
    loss_scale_.restore(loss_scale_.dynamic() ? c.loss_scale : loss_scale_.value(),
                        c.loss_scale_finite_run, c.skipped_steps);
    for (Worker& w : workers_) w.net->set_loss_scale(loss_scale_.value());
  }
  for (Worker& w : workers_) {
    Net<float>& n = *w.net;
    for (const ParamSlot& s : n.param_slots()) {
      Blob<float>& blob = *n.layer(s.layer).params()[s.index];
      const std::string& layer = n.layer(s.layer).name();
      write_tensor(c, param_key(layer, s.index), blob.shape(), *w.device, blob.mutable_data(), path);
      for (int h = 0; w.solver && h < w.solver->settings().histories(); ++h)
        write_tensor(c, history_key(layer, s.index, h), blob.shape(), *w.device,
                     w.solver->history(h).data() + s.offset, path);
    }
    for (int i = 0; i < n.num_layers(); ++i)
      for (size_t k = 0; k < n.layer(i).state().size(); ++k) {
        Blob<float>& blob = *n.layer(i).state()[k];
        write_tensor(c, state_key(n.layer(i).name(), static_cast<int>(k)), blob.shape(), *w.device,
                     blob.mutable_data(), path);
      }
    if (w.solver) w.solver->set_iteration(c.iteration);
  }
  if (c.iteration >= max_iterations_)
    throw UsageError(cat(path, ": the checkpoint is at iteration ", c.iteration,
                         ", and this run ends at ", max_iterations_,
                         ": nothing is left to train (the iterations count from the "
                         "start, as Caffe's max_iter: give more)"));
  if (c.offset >= train_data_->size())
    throw UsageError(cat(path, ": its data position (epoch ", c.epoch, ", sample ", c.offset,
                         ") is past the training set's ", train_data_->size(),
                         " samples: a checkpoint of another data set?"));
  start_position_ = {c.epoch, c.offset};
  if (static_cast<uint64_t>(c.seed) != config_.seed) {
    std::fprintf(out_, "cgdp: resuming with the checkpoint's seed %lld (not %llu)\n",
                 static_cast<long long>(c.seed), static_cast<unsigned long long>(config_.seed));
    config_.seed = static_cast<uint64_t>(c.seed);
  }
  std::fprintf(out_, "cgdp: resumed from %s at iteration %lld\n", path.c_str(),
               static_cast<long long>(c.iteration));
}

void Trainer::load_cudnn_algorithms() {
  const std::string& path = config_.cudnn_algorithms_path;
  if (!path.empty() && std::filesystem::exists(path)) ConvAlgorithmTable::process().merge_text(read_file(path), path);
}

std::string Trainer::save_cudnn_algorithms() const {
  const std::string& path = config_.cudnn_algorithms_path;
  if (path.empty() || rank() != 0) return "";
  const ConvAlgorithmTable& table = ConvAlgorithmTable::process();
  write_file_atomically(path, table.to_text());
  return cat("cgdp: wrote ", table.size(), " cuDNN convolution choice", table.size() == 1 ? "" : "s", " to ", path);
}

void Trainer::save_parameters(const std::string& path) {
  average_state();
  if (rank() != 0) return;
  write_parameters_safetensors(*workers_[0].net, path, {{"format", "cgdp-parameters"}, {"model", net().name()},
                                                        {"iterations", std::to_string(iteration())}});
}

}  // namespace cgdp
