#!/usr/bin/env bash
# Configures and builds cgdp in build/ (Release). Usage: tools/build.sh [cmake targets...]
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
if [[ ! -f build/CMakeCache.txt ]]; then
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
if (($#)); then cmake --build build -j"$jobs" --target "$@"; else cmake --build build -j"$jobs"; fi
