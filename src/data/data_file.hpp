// Finding and reading data files, gzip-compressed or plain (zlib passes plain files through).
#pragma once

#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cgdp/core/error.hpp"

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

  // The most bytes that may still be read: a plain file's size, or the most a gzip file of its
  // size can inflate to (deflate's 1032:1), less what was read. Bounds what a header may claim,
  // so a gzip bomb fails before it fills memory.
  uint64_t bytes_left_bound() const { return bound_ > consumed_ ? bound_ - consumed_ : 0; }
  // The bound in words, for a message that continues "expected N bytes of X".
  std::string bound_text() const {
    return gzip_ ? cat(", the file holds at most ", bytes_left_bound(), " (the most ", stored_,
                       " bytes of gzip inflate to)")
                 : cat(", file ends after ", bytes_left_bound(), " (as its size gives)");
  }

 private:
  std::string path_;
  gzFile file_;
  bool gzip_ = false;
  uint64_t stored_ = 0, bound_ = 0, consumed_ = 0;
};

// Returns DIR/NAME for the first NAME in `names` that exists as a file; otherwise throws
// DataError "no WHAT in DIR (tried NAME1, NAME2)".
std::string find_data_file(const std::string& dir, const std::vector<std::string>& names,
                           const std::string& what);

}  // namespace cgdp
