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
# shellcheck disable=SC2046  # junit_flag prints nothing or one option and its path
stage "tests (build/)" ctest --output-on-failure -j"$(nproc)" --timeout 900 $(junit_flag build)
