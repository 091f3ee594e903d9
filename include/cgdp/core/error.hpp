// Typed errors that carry where a problem is (file, line, layer, device); only main() turns them
// into an exit code.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace cgdp {

// Concatenates anything printable with operator<< (GCC 12 has no <format>).
template <typename... Args>
std::string cat(Args&&... args) {
  std::ostringstream out;
  (out << ... << std::forward<Args>(args));
  return out.str();
}

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The model file or the network it describes is wrong (syntax, unknown type, shapes).
class ModelError : public Error {
 public:
  using Error::Error;
};

// A data file is missing, truncated or holds values out of range.
class DataError : public Error {
 public:
  using Error::Error;
};

// Reading or writing a file failed (checkpoints, metrics, timelines).
class IoError : public Error {
 public:
  using Error::Error;
};

// A device call failed (allocation, copy, kernel launch); the message names the device.
class DeviceError : public Error {
 public:
  using Error::Error;
};

// Training diverged or another run-time check failed.
class RuntimeCheckError : public Error {
 public:
  using Error::Error;
};

// A peer (parameter-server shard or host) refused us, did not answer in time, went away, or sent
// something malformed; the message names the peer and its address.
class NetworkError : public Error {
 public:
  using Error::Error;
};

// Bad command-line usage.
class UsageError : public Error {
 public:
  using Error::Error;
};

}  // namespace cgdp

// Internal invariant: a failure here is a bug in cgdp, reported with file:line.
#define CGDP_ASSERT(cond)                                                                   \
  do {                                                                                      \
    if (!(cond))                                                                            \
      throw ::cgdp::Error(::cgdp::cat(__FILE__, ":", __LINE__, ": internal check failed: ", \
                                      #cond));                                              \
  } while (0)
