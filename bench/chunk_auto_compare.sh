#!/usr/bin/env bash
# --chunk auto against an exhaustive sweep of the same plans (tools/chunk_tuner) on one model and
# one profile: the plan each search settled on, after how many iterations, and that plan's median
# in the sweep against the sweep's best. The sweep's best is the least of many noisy medians, so
# it flatters itself (the winner's curse): a second, confirming sweep over only the chosen plans
# and the sweep's best, interleaved, gives the ratio this script judges by.
# Usage: bench/chunk_auto_compare.sh [MODEL] [RUNS] [PLOT.svg|PLOT.png]
# Env: DEVICES (4), BATCH (16), DATA (Fashion-MNIST), ITERS (130 per auto run), ROUNDS (3),
#      CONFIRM_ROUNDS (6).
# Set-up: tools/setup-debian.sh
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:-fashion_cnn}
runs=${2:-3}
plot=${3:-}
common=(--model "$model" --data "${DATA:-idx:/usr/share/datasets/fashion-mnist}"
        --devices "${DEVICES:-4}" --oversubscribe --batch "${BATCH:-16}")
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

echo "before: $(uptime)"
build/cgdp profile "${common[@]}" -o "$out/profile.json" > /dev/null
for r in $(seq "$runs"); do
  build/cgdp train "${common[@]}" --iterations "${ITERS:-130}" --chunk auto --plain \
    --profile "$out/profile.json" --test-interval -1 --test-samples 100 > "$out/auto$r.log"
  grep -E "chunk search|chosen plan" "$out/auto$r.log" | sed "s/^/run $r: /"
done
build/tools/chunk_tuner/chunk_tuner "${common[@]}" --profile "$out/profile.json" \
  --rounds "${ROUNDS:-3}" --interval 10 --warmup 2 ${plot:+--plot "$plot"} | tee "$out/sweep.txt"
echo "after: $(uptime)"

# The sweep's median of each plan, and the best; then each run's choice against them.
best=$(awk '/^best measured/ {gsub(/[()]/, "", $5); print $5}' "$out/sweep.txt")
best_plan=$(sed -n 's/^best measured: --chunk \([^ ]*\).*/\1/p' "$out/sweep.txt")
declare -A chosen settled
for r in $(seq "$runs"); do
  chosen[$r]=$(sed -n 's/^cgdp: chosen plan: --chunk //p' "$out/auto$r.log")
  settled[$r]=$(sed -n 's/^cgdp: chunk search settled after \([0-9]*\) iterations.*/\1/p' \
    "$out/auto$r.log")
done
confirm_plans=$(printf '%s\n' "$best_plan" "${chosen[@]}" | awk 'NF && !seen[$0]++' | paste -sd ' ')
echo
echo "confirming sweep: $confirm_plans, ${CONFIRM_ROUNDS:-6} interleaved rounds"
# shellcheck disable=SC2086  # one word per plan
build/tools/chunk_tuner/chunk_tuner "${common[@]}" --profile "$out/profile.json" \
  --plans $confirm_plans --rounds "${CONFIRM_ROUNDS:-6}" --interval 10 --warmup 2 |
  tee "$out/confirm.txt"
median_of() { awk -v p="$1" '$1 == p && NF == 7 {print $4}' "$2"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (a == "" || b == "") print "-"; else printf "%.3f", a / b}'; }
confirm_best=$(median_of "$best_plan" "$out/confirm.txt")
echo
printf "%-4s %-14s %8s %13s %13s %11s %15s %11s\n" run chosen settled "sweep med ms" \
  "sweep best" chosen/best "confirm med ms" chosen/best
for r in $(seq "$runs"); do
  c=${chosen[$r]}
  median=$(median_of "$c" "$out/sweep.txt")
  confirmed=$(median_of "$c" "$out/confirm.txt")
  printf "%-4s %-14s %8s %13s %13s %11s %15s %11s\n" "$r" "$c" "${settled[$r]:-no}" "$median" \
    "$best" "$(ratio "$median" "$best")" "$confirmed" "$(ratio "$confirmed" "$confirm_best")"
done
echo "(the last column: the chosen plan's confirming median over the sweep best's, $best_plan)"
