// Whole-file reads, and writes through a temporary file, fsync and rename.
#include "cgdp/io/file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdint>
#include <fstream>
#include <system_error>

#include "cgdp/core/error.hpp"

namespace cgdp {

namespace {

std::string errno_text(int error) {
  return std::generic_category().message(error);
}

// What a file of this mode is when it is not a regular file ("a device", "a FIFO", ...), else "".
std::string non_regular_kind(mode_t mode) {
  if (S_ISREG(mode)) return "";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// The same for `path` when it exists, else "". Outputs are written whole through a rename, which
// would replace whatever is there.
std::string non_regular_kind(const std::filesystem::path& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) != 0 ? "" : non_regular_kind(st.st_mode);
}

[[noreturn]] void refuse_input(const std::filesystem::path& path, const std::string& kind) {
  throw IoError(cat(path.string(), ": is ", kind,
                    ", not a regular file (cgdp reads its inputs from regular files)"));
}

// Owns the temporary file until it has been renamed: closes the descriptor and removes the file
// on every early exit, so a failed write never leaves debris next to the target.
class TempFile {
 public:
  TempFile(std::string path, const std::filesystem::path& target)
      : path_(std::move(path)), target_(target.string()) {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) fail("cannot create temporary file");
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!renamed_) ::unlink(path_.c_str());
  }

  void write(std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t n = ::write(fd_, bytes.data(), bytes.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) fail("write failed");
      bytes.remove_prefix(static_cast<size_t>(n));
    }
  }

  void commit() {
    if (::fsync(fd_) != 0) fail("fsync failed");
    const int rc = ::close(fd_);
    fd_ = -1;
    if (rc != 0) fail("close failed");
    // A rename would replace a device, a FIFO or a socket at the target (as root, /dev/full).
    if (const std::string kind = non_regular_kind(target_); !kind.empty())
      throw IoError(cat(target_, ": is ", kind, ", not a regular file: nothing written"));
    if (::rename(path_.c_str(), target_.c_str()) != 0) fail("cannot rename the temporary file");
    renamed_ = true;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    const int error = errno;
    throw IoError(cat(target_, ": ", what, " (", path_, "): ", errno_text(error)));
  }

  std::string path_, target_;
  int fd_ = -1;
  bool renamed_ = false;
};

// Makes the rename itself durable. Some file systems cannot fsync a directory (EINVAL).
void sync_directory(const std::filesystem::path& target) {
  const std::filesystem::path dir = target.has_parent_path() ? target.parent_path() : ".";
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    throw IoError(cat(target.string(), ": cannot open directory ", dir.string(),
                      " to sync it: ", errno_text(errno)));
  const int rc = ::fsync(fd), error = errno;
  ::close(fd);
  if (rc != 0 && error != EINVAL)
    throw IoError(cat(target.string(), ": fsync of directory ", dir.string(),
                      " failed: ", errno_text(error)));
}

}  // namespace

std::string rank_file_path(const std::string& path, int rank) {
  if (rank == 0 || path.empty()) return path;
  std::filesystem::path p(path);
  return (p.parent_path() / cat(p.stem().string(), ".rank", rank, p.extension().string())).string();
}

std::string read_file(const std::filesystem::path& path) {
  std::string bytes;
  read_file(path, bytes);
  return bytes;
}

void check_regular_input(const std::filesystem::path& path) {
  if (const std::string kind = non_regular_kind(path); !kind.empty()) refuse_input(path, kind);
}

void read_file(const std::filesystem::path& path, std::string& bytes) {
  // O_NONBLOCK: a FIFO opens at once (and is refused below) instead of waiting for a writer.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    throw IoError(error == ENOENT ? cat(path.string(), ": no such file")
                                  : cat(path.string(), ": cannot open for reading: ", errno_text(error)));
  }
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw IoError(cat(path.string(), ": cannot get the size: ", errno_text(errno)));
  if (S_ISDIR(st.st_mode)) throw IoError(cat(path.string(), ": is a directory, not a file"));
  if (const std::string kind = non_regular_kind(st.st_mode); !kind.empty())
    refuse_input(path, kind);
  const size_t size = static_cast<size_t>(st.st_size);
  // A file larger than the machine's memory (a sparse 100 GB "weights" file) is named, not met
  // with std::bad_alloc (or the OOM killer) when its bytes are allocated.
  const auto memory = static_cast<uint64_t>(::sysconf(_SC_PHYS_PAGES)) *
                      static_cast<uint64_t>(::sysconf(_SC_PAGE_SIZE));
  if (memory > 0 && size > memory)
    throw IoError(cat(path.string(), ": ", size, " bytes, more than this machine's memory (",
                      memory, " bytes): cgdp reads such a file whole and cannot"));
  bytes.resize(size);
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::read(fd, bytes.data() + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      throw IoError(cat(path.string(), ": read error after ", done, " of ", size, " bytes",
                        n < 0 ? cat(": ", errno_text(errno)) : std::string()));
    done += static_cast<size_t>(n);
  }
}

void write_file_atomically(const std::filesystem::path& path,
                           std::initializer_list<std::string_view> pieces) {
  TempFile temp(cat(path.string(), ".tmp.", ::getpid()), path);
  for (std::string_view piece : pieces) temp.write(piece);
  temp.commit();
  sync_directory(path);
}

void check_writable(const std::filesystem::path& path, std::string_view what) {
  auto fail = [&](const std::string& reason) {
    throw IoError(cat(path.string(), ": cannot write ", what, " (", reason, ")"));
  };
  if (const std::string kind = non_regular_kind(path); !kind.empty())
    fail(cat("it is ", kind, "; cgdp writes its outputs as regular files only"));
  const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : ".";
  const std::filesystem::path probe =
      dir / cat(".", path.filename().string(), ".probe.", ::getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) fail(cat("cannot create a file in ", dir.string(), ": ", errno_text(errno)));
  ::close(fd);
  ::unlink(probe.c_str());
}

void create_directories(const std::filesystem::path& dir, std::string_view what) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    throw IoError(
        cat(dir.string(), ": cannot create the directory for ", what, " (", ec.message(), ")"));
}

bool same_file(const std::filesystem::path& a, const std::filesystem::path& b) {
  std::error_code ec;
  if (std::filesystem::equivalent(a, b, ec)) return true;  // both exist: hard links too
  const auto canonical_a = std::filesystem::weakly_canonical(a, ec);
  const auto canonical_b = std::filesystem::weakly_canonical(b, ec);
  return !ec && canonical_a == canonical_b;
}

int remove_stale_temporaries(const std::filesystem::path& dir, std::string_view stem) {
  int removed = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir.empty() ? "." : dir, ec)) {
    const std::string name = entry.path().filename().string();
    const size_t tmp = name.rfind(".tmp.");
    if (!name.starts_with(stem) || tmp == std::string::npos) continue;
    int pid = 0;
    const char* digits = name.data() + tmp + 5;
    const auto [end, error] = std::from_chars(digits, name.data() + name.size(), pid);
    if (error != std::errc() || end != name.data() + name.size() || pid <= 0) continue;
    if (::kill(pid, 0) == 0 || errno == EPERM) continue;  // its writer may still be at work
    removed += std::filesystem::remove(entry.path(), ec) ? 1 : 0;
  }
  return removed;
}

}  // namespace cgdp
