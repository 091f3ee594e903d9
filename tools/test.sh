#!/usr/bin/env bash
# One command for tests: installs dependencies, builds everything, runs the whole CTest suite.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup-debian.sh
tools/build.sh
cd build && ctest --output-on-failure -j"$(nproc)" --timeout 900
