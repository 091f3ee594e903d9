#!/usr/bin/env bash
# One command for users: installs dependencies, builds, then runs `cgdp <args>` (default: train).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup-debian.sh
tools/build.sh cgdp
(($#)) || set -- train
exec build/cgdp "$@"
