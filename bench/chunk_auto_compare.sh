#!/usr/bin/env bash
# --chunk auto against an exhaustive sweep of the same plans (tools/chunk_tuner) on one model and
# one profile: the plan each search settled on, after how many iterations, and that plan's median
# in the sweep against the sweep's best.
# Usage: bench/chunk_auto_compare.sh [MODEL] [RUNS] [PLOT.svg|PLOT.png]
# Env: DEVICES (4), BATCH (16), DATA (Fashion-MNIST), ITERS (130 per auto run), ROUNDS (3).
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:-fashion_cnn}
runs=${2:-3}
plot=${3:-}
common=(--model "$model" --data "${DATA:-idx:/usr/share/datasets/fashion-mnist}"
        --devices "${DEVICES:-4}" --batch "${BATCH:-16}")
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
echo
printf "%-4s %-16s %10s %16s %14s %14s\n" run chosen settled "sweep median ms" "sweep best ms" "chosen/best"
for r in $(seq "$runs"); do
  chosen=$(sed -n 's/^cgdp: chosen plan: --chunk //p' "$out/auto$r.log")
  settled=$(sed -n 's/^cgdp: chunk search settled after \([0-9]*\) iterations.*/\1/p' "$out/auto$r.log")
  median=$(awk -v p="$chosen" '$1 == p && NF == 7 {print $4}' "$out/sweep.txt")
  printf "%-4s %-16s %10s %16s %14s %14s\n" "$r" "$chosen" "${settled:-no}" "$median" "$best" \
    "$(awk -v a="$median" -v b="$best" 'BEGIN {printf "%.3f", a / b}')"
done
