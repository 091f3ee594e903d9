// The one test file compiled with the tree's absolute paths (tests/CMakeLists.txt defines them).
#include "support/test_paths.hpp"

namespace cgdp::testing {

const std::string& source_dir() {
  static const std::string dir = CGDP_SOURCE_DIR;
  return dir;
}

const std::string& binary_dir() {
  static const std::string dir = CGDP_BINARY_DIR;
  return dir;
}

}  // namespace cgdp::testing
