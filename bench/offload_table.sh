#!/usr/bin/env bash
# Issue 35's figures: a model trained within a fraction of the memory `inspect --memory` says it
# needs (--offload auto), beside the same run unconstrained: ms per iteration of each, the
# measured and the predicted slowdown, whether the saved parameters are the same bits, and each
# device's peak against the budget.
#   bench/offload_table.sh [MODEL=resnet152] [BATCH=16] [FRACTION=0.4] [ITERATIONS=4]
# Set-up: tools/setup-debian.sh
set -euo pipefail
MODEL=${1:-resnet152} BATCH=${2:-16} FRACTION=${3:-0.4} ITERATIONS=${4:-4}
CGDP=${CGDP:-$(dirname "$0")/../build/cgdp}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
common=(--model "$MODEL" --data synthetic --batch "$BATCH")

need=$("$CGDP" inspect --memory --json "${common[@]}" --test-batch "$BATCH" | python3 -c 'import json,sys; print(json.load(sys.stdin)["worker_bytes"][0])')
budget=$(python3 -c "print(round($need * $FRACTION / 2**30, 4))")
"$CGDP" profile "${common[@]}" --iterations 2 --warmup 1 --out "$OUT/profile.json" > /dev/null
plan=$("$CGDP" inspect --memory "${common[@]}" --test-batch "$BATCH" --device-memory-gb "$budget" --profile "$OUT/profile.json")
echo "$plan" | grep -E "^(plan|fits|predicted)"

# Mean ms per iteration over all but the first, from the metrics' elapsed time at each iteration.
run() {
  "$CGDP" train "${common[@]}" --test-batch "$BATCH" --iterations "$ITERATIONS" --display 1 --test-samples "$BATCH" \
    --test-interval -1 --save "$OUT/$1.safetensors" --metrics "$OUT/$1.jsonl" "${@:2}" > "$OUT/$1.log" 2>&1
  python3 - "$OUT/$1.jsonl" <<'PY'
import json, sys
t = [r["elapsed_s"] for r in map(json.loads, open(sys.argv[1])) if r["phase"] == "train"]
print(f"{1000 * (t[-1] - t[0]) / (len(t) - 1):.0f}")
PY
}
owned=$(run owned --offload off)
planned=$(run planned --device-memory-gb "$budget")
grep -E "activations planned|peak" "$OUT/planned.log" | sed 's/^/  /'
same=$(cmp -s "$OUT/owned.safetensors" "$OUT/planned.safetensors" && echo "yes" || echo "NO")
predicted=$(echo "$plan" | sed -n 's/.*(\([-+0-9.]*%\)).*/\1/p')
measured=$(python3 -c "print(f'{100 * ($planned / $owned - 1):+.1f}%')")
printf "| %s b%s | needs %.2f GiB | budget %s GiB | %s ms/it | %s ms/it | %s | %s | %s |\n" \
  "$MODEL" "$BATCH" "$(python3 -c "print($need / 2**30)")" "$budget" "$owned" "$planned" "$measured" "$predicted" "$same"
