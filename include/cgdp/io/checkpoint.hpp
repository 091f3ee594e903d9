// Training checkpoints: parameters, solver history and layer state, plus where training stood,
// in one safetensors file whose data section is guarded by a CRC-32.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "cgdp/io/safetensors.hpp"
#include "cgdp/tensor/shape.hpp"

namespace cgdp {

struct CheckpointTensor {
  Shape shape;
  std::vector<float> values;  // count_of(shape) elements
};

struct Checkpoint {
  // Keyed by param_key(), history_key() or state_key().
  std::map<std::string, CheckpointTensor> tensors;
  // Computed by the caller from layer names, types and parameter shapes; load does not check it,
  // check_compatible() does.
  std::string model_fingerprint;
  int64_t iteration = 0;  // iterations completed
  int64_t epoch = 0;      // data position: the epoch, and the sample offset within it
  int64_t offset = 0;
  int64_t seed = 0;
  // The convolution algorithms the run chose (ConvAlgorithmTable::to_text(); empty on the CPU
  // backend and in checkpoints written before they were stored).
  std::string conv_algorithms;
  // Loss scaling's state (loss_scale.hpp), 0 when the run had none.
  double loss_scale = 0;
  int64_t loss_scale_finite_run = 0;
  int64_t skipped_steps = 0;
};

// "param/<layer>/<index>", "history/<layer>/<index>", "state/<layer>/<index>". Layer names may
// hold '/', so look tensors up by building the key rather than by splitting one.
std::string param_key(std::string_view layer, int index);
// `buffer` 1 is the second history of AdaDelta and Adam: "history2/<layer>/<index>".
std::string history_key(std::string_view layer, int index, int buffer = 0);
std::string state_key(std::string_view layer, int index);

// Writes atomically: a crash leaves the previous checkpoint in place.
void save_checkpoint(const std::filesystem::path& path, const Checkpoint& checkpoint);

// Throws IoError naming the file when it is not a cgdp checkpoint, is truncated, or its data
// fails the CRC ("corrupt: CRC mismatch").
Checkpoint load_checkpoint(const std::filesystem::path& path);
// The same on a file already read.
Checkpoint checkpoint_contents(const SafetensorsFile& file);
// The same checks on a file already read (a checkpoint given as --weights).
void check_checkpoint_file(const SafetensorsFile& file);

// Throws IoError when `checkpoint` was written for a model whose fingerprint is not `fingerprint`.
void check_compatible(const Checkpoint& checkpoint, std::string_view fingerprint,
                      const std::filesystem::path& path);

}  // namespace cgdp
