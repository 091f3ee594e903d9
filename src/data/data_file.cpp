// Data-file lookup and gzip-or-plain reading through zlib, with errors that name the file.
#include "data_file.hpp"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "cgdp/core/error.hpp"
#include "cgdp/io/file.hpp"

namespace cgdp {

namespace {

// Deflate's largest ratio: one 258-byte match per 2 bits, about 1032 to 1.
constexpr uint64_t kMaxDeflateRatio = 1032;

// The file's size on disk; `gzip` says whether it starts with gzip's magic.
uint64_t stored_size(const std::string& path, bool& gzip) {
  std::ifstream in(path, std::ios::binary);
  unsigned char magic[2] = {};
  in.read(reinterpret_cast<char*>(magic), 2);
  in.seekg(0, std::ios::end);
  const auto size = static_cast<uint64_t>(std::max<std::streamoff>(in.tellg(), 0));
  gzip = in && magic[0] == 0x1f && magic[1] == 0x8b && size >= 18;  // header 10, trailer 8
  return size;
}

}  // namespace

GzFile::GzFile(std::string path)
    : path_((check_regular_input(path), std::move(path))), file_(gzopen(path_.c_str(), "rb")) {
  if (!file_) throw IoError(cat(path_, ": cannot open: ", std::strerror(errno)));
  gzbuffer(file_, 1 << 20);
  // Not the trailer's size: that is the last member's only (a multi-member gzip) and wraps at
  // 4 GiB. What no gzip of this size can exceed still stops a header that claims terabytes.
  stored_ = stored_size(path_, gzip_);
  bound_ = gzip_ ? stored_ * kMaxDeflateRatio : stored_;
}

GzFile::~GzFile() {
  gzclose(file_);
}

size_t GzFile::read(void* dst, size_t bytes) {
  size_t done = 0;
  while (done < bytes) {
    // gzread takes an unsigned int length, so large reads go in pieces.
    const unsigned piece = static_cast<unsigned>(std::min<size_t>(bytes - done, INT_MAX));
    const int got = gzread(file_, static_cast<char*>(dst) + done, piece);
    if (got < 0) {
      int code = 0;
      const char* message = gzerror(file_, &code);
      throw DataError(cat(path_, ": corrupt file after ", done, " bytes: ", message));
    }
    done += static_cast<size_t>(got);
    if (static_cast<unsigned>(got) < piece) break;
  }
  consumed_ += done;
  return done;
}

size_t GzFile::append(std::vector<uint8_t>& out, size_t bytes) {
  constexpr size_t kMinChunk = size_t{1} << 20, kMaxChunk = size_t{64} << 20;
  size_t done = 0;
  while (done < bytes) {
    // Chunks grow with what has been read, so small files cost little and large ones few calls.
    const size_t chunk = std::clamp(out.size(), kMinChunk, kMaxChunk);
    const size_t want = std::min(bytes - done, chunk);
    const size_t old_size = out.size();
    out.resize(old_size + want);
    const size_t got = read(out.data() + old_size, want);
    out.resize(old_size + got);
    done += got;
    if (got < want) break;
  }
  return done;
}

uint32_t GzFile::read_be32(const char* what) {
  unsigned char b[4];
  if (read(b, 4) != 4) throw DataError(cat(path_, ": file ends inside the header (", what, ")"));
  return uint32_t{b[0]} << 24 | uint32_t{b[1]} << 16 | uint32_t{b[2]} << 8 | uint32_t{b[3]};
}

std::string find_data_file(const std::string& dir, const std::vector<std::string>& names,
                           const std::string& what) {
  std::string tried;
  for (const std::string& name : names) {
    const std::filesystem::path path = std::filesystem::path(dir) / name;
    std::error_code ec;
    if (std::filesystem::is_regular_file(path, ec)) return path.string();
    if (std::filesystem::exists(path, ec)) check_regular_input(path);  // a FIFO: named, not skipped
    if (ec && ec != std::errc::no_such_file_or_directory)  // e.g. a directory we may not search
      throw DataError(cat(path.string(), ": cannot look at ", what, ": ", ec.message()));
    tried += tried.empty() ? name : ", " + name;
  }
  throw DataError(cat("no ", what, " in ", dir, " (tried ", tried, ")"));
}

}  // namespace cgdp
