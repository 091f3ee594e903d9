// The one test file compiled with the tree's absolute paths (tests/CMakeLists.txt defines them).
// CGDP_TEST_SOURCE_DIR and CGDP_TEST_BINARY_DIR replace them where the binaries run elsewhere
// (bench/gpu/run.sh test: the GPU machine unpacks them into a folder of its own).
#include "support/test_paths.hpp"

#include <cstdlib>

namespace cgdp::testing {

namespace {

std::string from_environment(const char* name, const char* compiled_in) {
  const char* value = std::getenv(name);
  return value && *value ? value : compiled_in;
}

}  // namespace

const std::string& source_dir() {
  static const std::string dir = from_environment("CGDP_TEST_SOURCE_DIR", CGDP_SOURCE_DIR);
  return dir;
}

const std::string& binary_dir() {
  static const std::string dir = from_environment("CGDP_TEST_BINARY_DIR", CGDP_BINARY_DIR);
  return dir;
}

}  // namespace cgdp::testing
