// The safetensors file format: an 8-byte little-endian header length, a JSON header naming each
// tensor's dtype, shape and byte range, then the raw little-endian tensor bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cgdp/tensor/shape.hpp"

namespace cgdp {

enum class DType { kF32, kF64 };

std::string_view dtype_name(DType dtype);  // "F32", "F64"
size_t dtype_size(DType dtype);            // bytes per element

using Metadata = std::map<std::string, std::string>;

// A tensor to be written: borrowed bytes, which must hold count_of(shape) elements of dtype.
struct TensorRef {
  DType dtype;
  Shape shape;
  std::span<const std::byte> bytes;

  static TensorRef of(std::span<const float> values, Shape shape);
  static TensorRef of(std::span<const double> values, Shape shape);
};
using TensorRefs = std::map<std::string, TensorRef>;

// Where a tensor lies: [begin, end) counts bytes from the start of the data section.
struct TensorEntry {
  DType dtype;
  Shape shape;
  uint64_t begin = 0, end = 0;
};
using TensorEntries = std::map<std::string, TensorEntry>;

// The data section holding `tensors`, and each one's entry. Wider dtypes come first, then names
// in order, so every tensor is aligned to its element size in the file.
struct TensorLayout {
  TensorEntries entries;
  std::string data;
};
TensorLayout lay_out_tensors(const TensorRefs& tensors);

// The bytes before the data section: the length, the JSON, and spaces up to a multiple of 8.
std::string encode_header(const TensorEntries& entries, const Metadata& metadata);

// Writes a safetensors file atomically (see write_file_atomically).
void save_safetensors(const std::filesystem::path& path, const TensorRefs& tensors,
                      const Metadata& metadata = {});

// A whole safetensors file in memory, validated on construction.
class SafetensorsFile {
 public:
  // Throws IoError naming `source` when anything is wrong: a header length past the end, bad
  // JSON, a duplicate name, an unsupported dtype, a byte range that disagrees with dtype and
  // shape, ranges that overlap or leave gaps, or a data section shorter than the ranges need.
  SafetensorsFile(std::string bytes, std::string source);

  const std::string& source() const { return source_; }
  const TensorEntries& tensors() const { return entries_; }
  const Metadata& metadata() const { return metadata_; }
  std::string_view data_section() const;
  // The bytes before the data section, as stored: the length, the JSON header and its padding.
  std::string_view header_section() const;

  // The tensor's entry; IoError when the file has no such tensor.
  const TensorEntry& entry(const std::string& name) const;
  // The tensor's elements converted to T (float or double) from whichever dtype is stored.
  template <typename T>
  std::vector<T> values(const std::string& name) const;

 private:
  void parse_header(std::string_view header);

  std::string bytes_, source_;
  size_t data_begin_ = 0;
  TensorEntries entries_;
  Metadata metadata_;
};

SafetensorsFile load_safetensors(const std::filesystem::path& path);

}  // namespace cgdp
