// Where the tests find the source tree and the built programs. Only test_paths.cpp holds the
// absolute paths, so every other test file compiles the same in any clone (and its compiler-cache
// entry serves them all).
#pragma once

#include <string>

namespace cgdp::testing {

const std::string& source_dir();  // the repository's root
const std::string& binary_dir();  // the build folder: cgdp, tools/chunk_tuner/chunk_tuner, ...

}  // namespace cgdp::testing
