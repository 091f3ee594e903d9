#!/usr/bin/env bash
# Installs cgdp's build and run dependencies from Debian's packages (idempotent, quiet when done).
set -euo pipefail
packages=(
  cmake g++ make pkg-config
  libopenblas-openmp-dev libprotobuf-dev protobuf-compiler libhwloc-dev zlib1g-dev
  libdnnl-dev libcli11-dev nlohmann-json3-dev libgtest-dev libgmock-dev libbenchmark-dev libzmq3-dev cppzmq-dev
  dataset-fashion-mnist gnuplot-nox iproute2
)
# Extra packages for benchmarks only (PyTorch peer): pass --bench.
if [[ "${1:-}" == "--bench" ]]; then packages+=(python3-torch python3-numpy); fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  sudo_cmd=""; [[ $(id -u) -ne 0 ]] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
