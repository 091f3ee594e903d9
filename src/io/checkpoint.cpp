// Checkpoints as safetensors files: tensors in F32, training position and a CRC in metadata that
// covers every byte of the file (version 2; version 1's covered the data section only).
#include "cgdp/io/checkpoint.hpp"

#include <zlib.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "cgdp/core/error.hpp"
#include "cgdp/io/file.hpp"
#include "cgdp/io/safetensors.hpp"

namespace cgdp {

namespace {

constexpr const char* kFormat = "cgdp-checkpoint";
constexpr const char* kVersion = "2";
constexpr const char* kDataOnlyVersion = "1";  // still read: its CRC leaves the header unchecked
constexpr std::string_view kCrcKey = "crc32";
constexpr std::string_view kCrcPlaceholder = "00000000";  // the CRC's own 8 digits while summed
constexpr std::string_view kKinds[] = {"param/", "history/", "history2/", "state/"};

// CRC-32 of the pieces in order, as 8 hex digits.
std::string crc_hex(std::initializer_list<std::string_view> pieces) {
  unsigned long crc = crc32_z(0L, Z_NULL, 0);
  for (std::string_view p : pieces)
    crc = crc32_z(crc, reinterpret_cast<const Bytef*>(p.data()), p.size());
  char text[9];
  std::snprintf(text, sizeof text, "%08lx", crc);
  return text;
}

// The header as it was summed: with `stored` in place of the placeholder, so that a changed
// header (metadata, names, shapes, offsets) no longer sums to it.
std::string header_as_summed(std::string_view header, const std::string& stored,
                             const std::string& source) {
  const std::string written = cat("\"", kCrcKey, "\":\"", stored, "\"");
  const size_t at = header.find(written);
  if (at == std::string_view::npos || header.find(written, at + 1) != std::string_view::npos)
    throw IoError(cat(source, ": corrupt: the header does not hold its CRC once"));
  std::string summed(header);
  summed.replace(at + written.size() - 1 - stored.size(), stored.size(), kCrcPlaceholder);
  return summed;
}

const std::string& field(const Metadata& metadata, const std::string& key,
                         const std::string& source) {
  const auto it = metadata.find(key);
  if (it == metadata.end())
    throw IoError(cat(source, ": checkpoint metadata has no \"", key, "\""));
  return it->second;
}

int64_t int_field(const Metadata& metadata, const std::string& key, const std::string& source) {
  const std::string& text = field(metadata, key, source);
  int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size())
    throw IoError(
        cat(source, ": checkpoint metadata \"", key, "\" is not an integer: \"", text, "\""));
  return value;
}

// Iterations and data positions: a negative one is no place in a run (a damaged or edited file).
int64_t count_field(const Metadata& metadata, const std::string& key, const std::string& source) {
  const int64_t value = int_field(metadata, key, source);
  if (value < 0)
    throw IoError(cat(source, ": checkpoint metadata \"", key, "\" is ", value,
                      "; expected a count >= 0 (a damaged or edited checkpoint)"));
  return value;
}

std::string key(std::string_view kind, std::string_view layer, int index) {
  return cat(kind, layer, "/", index);
}

void check_tensor_name(const std::string& name, const std::string& source) {
  for (std::string_view kind : kKinds)
    if (name.starts_with(kind)) return;
  throw IoError(
      cat(source, ": checkpoint tensor '", name, "' is not under param/, history/, history2/ or state/"));
}

// A finite number > 0 (the loss scale).
double positive_field(const Metadata& metadata, const std::string& key, const std::string& source) {
  const std::string& text = field(metadata, key, source);
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !std::isfinite(value) || value <= 0)
    throw IoError(
        cat(source, ": checkpoint metadata \"", key, "\" is not a number > 0: \"", text, "\""));
  return value;
}

}  // namespace

std::string param_key(std::string_view layer, int index) {
  return key("param/", layer, index);
}
std::string history_key(std::string_view layer, int index, int buffer) {
  return key(buffer == 0 ? "history/" : "history2/", layer, index);
}
std::string state_key(std::string_view layer, int index) {
  return key("state/", layer, index);
}

void save_checkpoint(const std::filesystem::path& path, const Checkpoint& checkpoint) {
  TensorRefs refs;
  for (const auto& [name, t] : checkpoint.tensors) {
    check_tensor_name(name, path.string());
    refs.emplace(name, TensorRef::of(t.values, t.shape));
  }
  const TensorLayout layout = lay_out_tensors(refs);
  Metadata metadata{{"format", kFormat},
                    {"version", kVersion},
                    {"model_fingerprint", checkpoint.model_fingerprint},
                    {"iteration", cat(checkpoint.iteration)},
                    {"epoch", cat(checkpoint.epoch)},
                    {"offset", cat(checkpoint.offset)},
                    {"seed", cat(checkpoint.seed)},
                    {std::string(kCrcKey), std::string(kCrcPlaceholder)}};
  if (!checkpoint.conv_algorithms.empty()) metadata["conv_algorithms"] = checkpoint.conv_algorithms;
  if (checkpoint.loss_scale > 0) {
    char text[32];  // the shortest form that reads back as the same double
    const auto end = std::to_chars(text, text + sizeof text, checkpoint.loss_scale).ptr;
    metadata["loss_scale"] = std::string(text, end);
    metadata["loss_scale_finite_run"] = cat(checkpoint.loss_scale_finite_run);
    metadata["skipped_steps"] = cat(checkpoint.skipped_steps);
  }
  // The CRC's digits have a fixed width, so the header keeps its length when they are filled in.
  metadata[std::string(kCrcKey)] = crc_hex({encode_header(layout.entries, metadata), layout.data});
  write_file_atomically(path, {encode_header(layout.entries, metadata), layout.data});
}

void check_checkpoint_file(const SafetensorsFile& file) {
  const std::string& source = file.source();
  const Metadata& metadata = file.metadata();
  const auto format = metadata.find("format");
  if (format == metadata.end() || format->second != kFormat)
    throw IoError(cat(source, ": not a cgdp checkpoint (metadata \"format\" is ",
                      format == metadata.end() ? "missing" : cat("\"", format->second, "\""), ")"));
  const std::string& version = field(metadata, "version", source);
  if (version != kVersion && version != kDataOnlyVersion)
    throw IoError(cat(source, ": checkpoint version ", version, " is not supported (this cgdp ",
                      "reads versions ", kDataOnlyVersion, " and ", kVersion, ")"));
  const bool whole_file = version == kVersion;
  const std::string stored =
      field(metadata, whole_file ? std::string(kCrcKey) : "data_crc32", source);
  const std::string computed =
      whole_file
          ? crc_hex({header_as_summed(file.header_section(), stored, source), file.data_section()})
          : crc_hex({file.data_section()});
  if (stored != computed)
    throw IoError(
        cat(source, ": corrupt: CRC mismatch (stored ", stored, ", computed ", computed, ")"));
}

Checkpoint load_checkpoint(const std::filesystem::path& path) {
  return checkpoint_contents(load_safetensors(path));
}

Checkpoint checkpoint_contents(const SafetensorsFile& file) {
  check_checkpoint_file(file);
  const std::string& source = file.source();
  const Metadata& metadata = file.metadata();
  Checkpoint checkpoint;
  checkpoint.model_fingerprint = field(metadata, "model_fingerprint", source);
  checkpoint.iteration = count_field(metadata, "iteration", source);
  checkpoint.epoch = count_field(metadata, "epoch", source);
  checkpoint.offset = count_field(metadata, "offset", source);
  checkpoint.seed = int_field(metadata, "seed", source);
  if (const auto algorithms = metadata.find("conv_algorithms"); algorithms != metadata.end())
    checkpoint.conv_algorithms = algorithms->second;
  if (metadata.count("loss_scale")) {
    checkpoint.loss_scale = positive_field(metadata, "loss_scale", source);
    checkpoint.loss_scale_finite_run = count_field(metadata, "loss_scale_finite_run", source);
    checkpoint.skipped_steps = count_field(metadata, "skipped_steps", source);
  }
  for (const auto& [name, entry] : file.tensors()) {
    check_tensor_name(name, source);
    if (entry.dtype != DType::kF32)
      throw IoError(cat(source, ": checkpoint tensor '", name, "' is ", dtype_name(entry.dtype),
                        ", expected F32"));
    checkpoint.tensors.emplace(name, CheckpointTensor{entry.shape, file.values<float>(name)});
  }
  return checkpoint;
}

void check_compatible(const Checkpoint& checkpoint, std::string_view fingerprint,
                      const std::filesystem::path& path) {
  if (checkpoint.model_fingerprint != fingerprint)
    throw IoError(cat("checkpoint ", path.string(),
                      " was written for a different model (fingerprint ",
                      checkpoint.model_fingerprint, "); expected ", fingerprint));
}

}  // namespace cgdp
