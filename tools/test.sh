#!/usr/bin/env bash
# One command for tests: installs dependencies, builds everything, runs the whole CTest suite.
# With CGDP_TIMINGS set to a folder, each step's seconds and the tests' JUnit report go there
# (tools/stage_timing.sh; .ci/run prints them).
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/stage_timing.sh
stage "set-up (tools/setup-debian.sh)" tools/setup-debian.sh
stage "configure and build (build/)" tools/build.sh
cd build
# The tests' OpenMP teams sleep at barriers rather than spin: ctest runs a test per core, and a
# team spinning while the other test held the second core took a convolution gradient check from
# 1.8 s to 37 s. (Only speed: each test's team size is its ENVIRONMENT's, tests/CMakeLists.txt.)
export OMP_WAIT_POLICY=PASSIVE
# shellcheck disable=SC2046  # junit_flag prints nothing or one option and its path
stage "tests (build/)" ctest --output-on-failure -j"$(nproc)" --timeout 900 --no-tests=error \
  $(junit_flag build)
