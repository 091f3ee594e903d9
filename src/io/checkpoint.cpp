// Checkpoints as safetensors files: tensors in F32, training position and a CRC in metadata.
#include "cgdp/io/checkpoint.hpp"

#include <zlib.h>

#include <charconv>
#include <cstdio>

#include "cgdp/core/error.hpp"
#include "cgdp/io/file.hpp"
#include "cgdp/io/safetensors.hpp"

namespace cgdp {

namespace {

constexpr const char* kFormat = "cgdp-checkpoint";
constexpr const char* kVersion = "1";
constexpr std::string_view kKinds[] = {"param/", "history/", "state/"};

std::string crc_hex(std::string_view data) {
  const unsigned long crc =
      crc32_z(crc32_z(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(data.data()), data.size());
  char text[9];
  std::snprintf(text, sizeof text, "%08lx", crc);
  return text;
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

std::string key(std::string_view kind, std::string_view layer, int index) {
  return cat(kind, layer, "/", index);
}

void check_tensor_name(const std::string& name, const std::string& source) {
  for (std::string_view kind : kKinds)
    if (name.starts_with(kind)) return;
  throw IoError(
      cat(source, ": checkpoint tensor '", name, "' is not under param/, history/ or state/"));
}

}  // namespace

std::string param_key(std::string_view layer, int index) {
  return key("param/", layer, index);
}
std::string history_key(std::string_view layer, int index) {
  return key("history/", layer, index);
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
  const Metadata metadata{{"format", kFormat},
                          {"version", kVersion},
                          {"model_fingerprint", checkpoint.model_fingerprint},
                          {"iteration", cat(checkpoint.iteration)},
                          {"epoch", cat(checkpoint.epoch)},
                          {"offset", cat(checkpoint.offset)},
                          {"seed", cat(checkpoint.seed)},
                          {"data_crc32", crc_hex(layout.data)}};
  write_file_atomically(path, {encode_header(layout.entries, metadata), layout.data});
}

Checkpoint load_checkpoint(const std::filesystem::path& path) {
  const SafetensorsFile file = load_safetensors(path);
  const std::string& source = file.source();
  const Metadata& metadata = file.metadata();
  const auto format = metadata.find("format");
  if (format == metadata.end() || format->second != kFormat)
    throw IoError(cat(source, ": not a cgdp checkpoint (metadata \"format\" is ",
                      format == metadata.end() ? "missing" : cat("\"", format->second, "\""), ")"));
  if (const std::string& version = field(metadata, "version", source); version != kVersion)
    throw IoError(cat(source, ": checkpoint version ", version,
                      " is not supported (this cgdp reads version ", kVersion, ")"));
  const std::string stored = field(metadata, "data_crc32", source);
  const std::string computed = crc_hex(file.data_section());
  if (stored != computed)
    throw IoError(
        cat(source, ": corrupt: CRC mismatch (stored ", stored, ", computed ", computed, ")"));
  Checkpoint checkpoint;
  checkpoint.model_fingerprint = field(metadata, "model_fingerprint", source);
  checkpoint.iteration = int_field(metadata, "iteration", source);
  checkpoint.epoch = int_field(metadata, "epoch", source);
  checkpoint.offset = int_field(metadata, "offset", source);
  checkpoint.seed = int_field(metadata, "seed", source);
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
