// Finding and reading data files, gzip-compressed or plain (zlib passes plain files through).
#pragma once

#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cgdp {

class GzFile {
 public:
  // Throws IoError if the file cannot be opened.
  explicit GzFile(std::string path);
  ~GzFile();
  GzFile(const GzFile&) = delete;
  GzFile& operator=(const GzFile&) = delete;

  const std::string& path() const { return path_; }
  // Reads up to `bytes` bytes; returns how many were read (fewer only at the end of the file).
  // Throws DataError for a corrupt gzip stream.
  size_t read(void* dst, size_t bytes);
  // Appends up to `bytes` bytes to `out`, growing it as data arrives so a corrupt header that
  // claims a huge size fails on the data, not on the allocation. Returns the bytes appended.
  size_t append(std::vector<uint8_t>& out, size_t bytes);
  // Big-endian 32-bit word (IDX headers); throws DataError naming `what` if the file ends.
  uint32_t read_be32(const char* what);

 private:
  std::string path_;
  gzFile file_;
};

// Returns DIR/NAME for the first NAME in `names` that exists as a file; otherwise throws
// DataError "no WHAT in DIR (tried NAME1, NAME2)".
std::string find_data_file(const std::string& dir, const std::vector<std::string>& names,
                           const std::string& what);

}  // namespace cgdp
