#!/usr/bin/env bash
# Two settings of `cgdp train`, side by side, on the CPU backend with 4 workers, fashion_cnn and
# resnet_small, cgdp and ps0. The settings alternate run by run, so both see the same machine;
# prints each one's median iteration time (the phase table's "total per iteration") and the ratio.
# Usage: bench/cpu_ab_compare.sh "A flags" "B flags" [ROUNDS] [ITERATIONS]
#   one issuing thread against one per worker:
#     bench/cpu_ab_compare.sh "--issue-threads one" "--issue-threads per-worker"
#   the aggregator on every core against the default (one thread per worker, a core per worker left):
#     bench/cpu_ab_compare.sh "--host-threads 2" ""
# Env: DEVICES (4), BATCH (16), MODELS ("fashion_cnn resnet_small"), SYNCS ("cgdp ps0")
# Set-up: tools/setup-debian.sh
set -euo pipefail
cd "$(dirname "$0")/.."
a=${1:?usage: bench/cpu_ab_compare.sh \"A flags\" \"B flags\" [ROUNDS] [ITERATIONS]}
b=${2-}
rounds=${3:-5}
iterations=${4:-30}
tools/build.sh cgdp >/dev/null
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
echo "A: ${a:-(defaults)}   B: ${b:-(defaults)}   $rounds rounds of $iterations iterations"
echo "machine: $(nproc) cores; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-13s %-6s %10s %10s %9s\n' model sync "A (ms)" "B (ms)" "A / B"
for model in ${MODELS:-fashion_cnn resnet_small}; do
  for sync in ${SYNCS:-cgdp ps0}; do
    for r in $(seq "$rounds"); do
      for side in a b; do
        # shellcheck disable=SC2086  # the flags are words
        build/cgdp train --model "$model" --data synthetic --devices "${DEVICES:-4}" --oversubscribe \
          --batch "${BATCH:-16}" --sync "$sync" --iterations "$iterations" --test-interval -1 \
          --test-samples 16 --plain --display "$iterations" --phase-table ${!side} \
          | awk '/total per iteration/ {print $4}' >>"$out/$model.$sync.$side"
      done
    done
    ta=$(median <"$out/$model.$sync.a")
    tb=$(median <"$out/$model.$sync.b")
    printf '%-13s %-6s %10.2f %10.2f %9.3f\n' "$model" "$sync" "$ta" "$tb" \
      "$(awk -v x="$ta" -v y="$tb" 'BEGIN {print x / y}')"
  done
done
echo "A / B above 1: B is faster"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
