#!/usr/bin/env bash
# One run, three ways: fashion_cnn on the CPU backend with a single device, 4 devices with cgdp,
# and 4 devices with ps0 (worker 0 as the server). Prints each run's per-phase table and a summary
# of iteration times. Usage: bench/cpu_sync_compare.sh [iterations] [per-worker batch]
# Set-up: tools/setup-debian.sh
set -euo pipefail
cd "$(dirname "$0")/.."
iterations=${1:-40}
batch=${2:-16}
tools/build.sh cgdp >/dev/null
out=$(mktemp -d)
run() {  # name, extra flags
  local name=$1; shift
  build/cgdp train --data synthetic --iterations "$iterations" --test-interval -1 --test-samples 100 \
    --plain --display "$iterations" --phase-table "$@" >"$out/$name.log" 2>&1
  echo "== $name: build/cgdp train --data synthetic --iterations $iterations $*"
  sed -n '/^phases/,/total per iteration/p;/^memory/p' "$out/$name.log"
}
run single --batch $((batch * 4))
run cgdp --batch "$batch" --devices 4 --oversubscribe --sync cgdp --chunk layer
run ps0 --batch "$batch" --devices 4 --oversubscribe --sync ps0
echo
echo "iteration time (ms, mean after the first iteration; the same global batch of $((batch * 4)) in each):"
for name in single cgdp ps0; do
  printf '  %-7s %s\n' "$name" "$(awk '/total per iteration/ {print $4}' "$out/$name.log")"
done
echo "(machine: $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg))"
rm -rf "$out"
