// A checkpoint as --resume reads it, and as --weights reads it (its parameters, or any other
// safetensors or .caffemodel the bytes turn out to be). Each input also runs with its CRC made
// right, so that mutations reach the checks behind the CRC.
#include <zlib.h>

#include <cstring>

#include "cgdp/caffe_import/stored_weights.hpp"
#include "cgdp/io/checkpoint.hpp"
#include "cgdp/io/safetensors.hpp"
#include "fuzz_support.hpp"

namespace {

// Fills the 8 hex digits after `key` with the CRC-32 of `covered` as it reads with 0s there.
void resign(std::string& bytes, const std::string& key, size_t header_end, bool whole_file) {
  const size_t at = bytes.find(key);
  if (at == std::string::npos || at + key.size() + 8 > header_end) return;
  const size_t digits = at + key.size();
  bytes.replace(digits, 8, "00000000");
  const std::string_view covered =
      whole_file ? std::string_view(bytes) : std::string_view(bytes).substr(header_end);
  const unsigned long crc =
      crc32_z(0L, reinterpret_cast<const Bytef*>(covered.data()), covered.size());
  char text[9];
  std::snprintf(text, sizeof text, "%08lx", crc);
  bytes.replace(digits, 8, text);
}

// The bytes with version 2's whole-file CRC and version 1's data CRC made right.
std::string resigned(std::string bytes) {
  uint64_t length = 0;
  if (bytes.size() < sizeof length) return bytes;
  std::memcpy(&length, bytes.data(), sizeof length);
  if (length > bytes.size() - sizeof length) return bytes;
  resign(bytes, "\"data_crc32\":\"", sizeof length + length, false);
  resign(bytes, "\"crc32\":\"", sizeof length + length, true);
  return bytes;
}

void read_as_checkpoint(const std::string& bytes) {
  cgdp::fuzz::expect_cgdp_errors_only(
      [&] { (void)cgdp::checkpoint_contents(cgdp::SafetensorsFile(bytes, "fuzz.ckpt")); });
  cgdp::fuzz::expect_cgdp_errors_only(
      [&] { (void)cgdp::weights_file_contents(bytes, "fuzz.ckpt"); });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes = cgdp::fuzz::bytes_of(data, size);
  read_as_checkpoint(bytes);
  if (const std::string fixed = resigned(bytes); fixed != bytes) read_as_checkpoint(fixed);
  return 0;
}
