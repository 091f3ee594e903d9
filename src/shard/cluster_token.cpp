// Loading and checking the cluster token from a file or the environment.
#include "cgdp/shard/cluster_token.hpp"

#include <fcntl.h>
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include <cctype>
#include <cstdlib>
#include <cstring>

#include "cgdp/core/error.hpp"
#include "cgdp/io/file.hpp"

namespace cgdp {
namespace {

constexpr size_t kMinToken = 16;
constexpr size_t kMaxToken = 255;  // ZMTP PLAIN carries the password with a one-byte length

std::string checked(std::string token, const std::string& source) {
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) token.pop_back();
  if (token.empty()) throw UsageError(cat("cluster token from ", source, " is empty"));
  if (token.find('\0') != std::string::npos)
    throw UsageError(cat("cluster token from ", source, " holds a NUL byte"));
  if (token.size() < kMinToken || token.size() > kMaxToken)
    throw UsageError(cat("cluster token from ", source, " is ", token.size(), " bytes; expected ",
                         kMinToken, " to ", kMaxToken, " (e.g. head -c 32 /dev/urandom | base64)"));
  return token;
}

}  // namespace

std::string load_cluster_token(const std::string& token_file, const char* env_var) {
  if (!token_file.empty()) {
    struct stat st {};
    if (::stat(token_file.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
      throw UsageError(cat("token file ", token_file, " is not a regular file (a directory?): ",
                           "--token-file names the file that holds the token"));
    if (::stat(token_file.c_str(), &st) == 0 && (st.st_mode & 077) != 0)
      throw UsageError(cat("token file ", token_file, " is readable by others (mode ", std::oct,
                           (st.st_mode & 0777), "); run chmod 600 ", token_file));
    return checked(read_file(token_file), cat("token file ", token_file));
  }
  const char* value = std::getenv(env_var);
  if (value == nullptr || *value == '\0')
    throw UsageError(cat("no cluster token: pass --token-file FILE or set ", env_var));
  return checked(value, cat("environment variable ", env_var));
}

bool create_cluster_token_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) return false;
  if (sodium_init() < 0) throw Error("libsodium failed to initialise");
  unsigned char secret[32];
  randombytes_buf(secret, sizeof secret);
  char hex[2 * sizeof secret + 1];
  sodium_bin2hex(hex, sizeof hex, secret, sizeof secret);
  const std::string temp = cat(path, ".tmp.", ::getpid());
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) throw IoError(cat("token file ", path, ": cannot create ", temp, ": ", std::strerror(errno)));
  const std::string text = cat(hex, "\n");
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && ::fsync(fd) == 0;
  ::close(fd);
  // link() fails when `path` appeared meanwhile, so a token another process wrote is never replaced.
  const bool placed = written && ::link(temp.c_str(), path.c_str()) == 0;
  const int error = errno;
  ::unlink(temp.c_str());
  if (!written) throw IoError(cat("token file ", path, ": cannot write ", temp));
  if (!placed && error != EEXIST) throw IoError(cat("token file ", path, ": ", std::strerror(error)));
  return placed;
}

}  // namespace cgdp
