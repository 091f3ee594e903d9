#!/usr/bin/env bash
# Installs cgdp's build, test and run dependencies from Debian's packages (idempotent, quiet when
# done). apt-get runs with --no-install-recommends, so every package the build reads from must be
# listed here or be a hard dependency of one that is: tools/check_setup_deps.py checks that.
# Usage: tools/setup-debian.sh [--bench] [--print-packages]
#   --bench           also the benchmark extras: the PyTorch peer (140 MB of packages)
#   --print-packages  print the package list, one a line, and install nothing
set -euo pipefail
packages=(
  # build
  cmake g++ make pkg-config protobuf-compiler
  # a compiler cache, used as the compiler launcher when installed (CMakeLists.txt)
  ccache
  # tools/fuzz.sh: clang, and its libFuzzer and sanitizer runtimes (which clang only recommends)
  clang libclang-rt-14-dev
  # libraries
  libopenblas-openmp-dev libprotobuf-dev libhwloc-dev zlib1g-dev libcli11-dev nlohmann-json3-dev
  libzmq3-dev cppzmq-dev libsodium-dev libgtest-dev libgmock-dev libbenchmark-dev
  # images: JPEG (the TurboJPEG and libjpeg APIs of libjpeg-turbo) and PNG
  libturbojpeg0-dev libjpeg-dev libpng-dev
  # the LMDB image databases of Caffe, and the HDF5 files of its HDF5Data layer
  liblmdb-dev libhdf5-dev
  # oneDNN, whose CMake config requires OpenCL, which libdnnl-dev only recommends
  libdnnl-dev ocl-icd-opencl-dev
  # tests and tools/run.sh: the default data set, python3 for tools/read_safetensors.py and
  # tools/check_setup_deps.py, the plots of chunk_tuner, the network-namespace launch test
  dataset-fashion-mnist python3 gnuplot-nox iproute2
  # tools/fashion_to_folder.py writes PNG/JPEG folders, and the image tests decode with it
  python3-pil
  # cgdp launch reaches other hosts over ssh; the launcher tests start ranks with mpirun
  openssh-client openmpi-bin
  # the bench scripts: awk, jq, and for bench/gpu/run.sh prepare: git, tar -J
  mawk jq git xz-utils
)
bench_packages=(
  python3-torch python3-numpy
  # bench/loader_peer.py: torchvision transforms and the photos of scikit-image
  python3-torchvision python3-skimage
)
print_only=0
for arg in "$@"; do
  case "$arg" in
    --bench) packages+=("${bench_packages[@]}") ;;
    --print-packages) print_only=1 ;;
    *) echo "setup-debian.sh: unknown option '$arg' (expected --bench or --print-packages)" >&2; exit 2 ;;
  esac
done
if ((print_only)); then printf '%s\n' "${packages[@]}"; exit 0; fi
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
