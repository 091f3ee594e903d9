#!/usr/bin/env bash
# Issue 35's figures: a model trained unconstrained, then within a fraction of the device memory
# that run held at its peak (--offload auto): ms per iteration of each, the measured and the
# predicted slowdown, whether the saved parameters are the same bits, and each device's peak
# against the budget. `inspect --memory`'s peak is printed beside (on CUDA the run also holds
# cuDNN's scratch, which inspect does not count).
#   bench/offload_table.sh [MODEL=resnet152] [BATCH=16] [FRACTION=0.4] [ITERATIONS=4]
# Environment: CGDP (the binary), FLAGS (added to profile and both train runs, e.g.
# "--device-kind cuda --tf32"), KEEP (a folder that keeps the logs, profile and metrics), TIMELINE=1
# (both runs write a timeline; bench/offload_timeline.py prints where their last iteration went).
# Set-up: tools/setup-debian.sh
set -euo pipefail
MODEL=${1:-resnet152} BATCH=${2:-16} FRACTION=${3:-0.4} ITERATIONS=${4:-4}
CGDP=${CGDP:-$(dirname "$0")/../build/cgdp}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
common=(--model "$MODEL" --data synthetic --batch "$BATCH")
read -r -a flags <<<"${FLAGS:-}"

need=$("$CGDP" inspect --memory --json "${common[@]}" --test-batch "$BATCH" | python3 -c 'import json,sys; print(json.load(sys.stdin)["worker_peak_bytes"][0])')
"$CGDP" profile "${common[@]}" "${flags[@]}" --iterations 2 --warmup 1 --out "$OUT/profile.json" > "$OUT/profile.log"
flags+=(--profile "$OUT/profile.json")  # the planned run's start line predicts its slowdown

# The logs, profile, metrics and timelines (not the saved parameters: too large to carry back).
keep() {
  [[ -n ${KEEP:-} ]] || return 0
  mkdir -p "$KEEP"
  find "$OUT" -maxdepth 1 -type f ! -name '*.safetensors' -exec cp {} "$KEEP/" \;
}

# Mean ms per iteration over all but the first, from the metrics' elapsed time at each iteration.
run() {
  local timeline=()
  [[ ${TIMELINE:-0} == 1 ]] && timeline=(--timeline "$OUT/$1_timeline.json")
  "$CGDP" train "${common[@]}" --test-batch "$BATCH" --iterations "$ITERATIONS" --display 1 --test-samples "$BATCH" \
    --test-interval -1 --save "$OUT/$1.safetensors" --metrics "$OUT/$1.jsonl" "${flags[@]}" "${timeline[@]}" "${@:2}" > "$OUT/$1.log" 2>&1 ||
    { tail -n 5 "$OUT/$1.log" >&2; keep; exit 1; }
  python3 - "$OUT/$1.jsonl" <<'PY'
import json, sys
t = [r["elapsed_s"] for r in map(json.loads, open(sys.argv[1])) if r["phase"] == "train"]
print(f"{1000 * (t[-1] - t[0]) / (len(t) - 1):.0f}")
PY
}
# Unconstrained, under a budget no run reaches, so that its end line gives its peak in bytes.
owned=$(run owned --offload off --device-memory-gb 4096)
peak=$(( (4096 << 30) - $(sed -n 's/.*: \([0-9]*\) bytes to spare$/\1/p' "$OUT/owned.log") ))
budget=$(python3 -c "print(int($peak * $FRACTION / 2**30 * 1e4) / 1e4)")
planned=$(run planned --device-memory-gb "$budget")
grep -E "activations planned|peak" "$OUT/planned.log" | sed 's/^/  /'
keep
if [[ ${TIMELINE:-0} == 1 ]]; then
  for r in owned planned; do echo "$r:"; python3 "$(dirname "$0")/offload_timeline.py" "$OUT/${r}_timeline.json" | sed 's/^/  /'; done
fi
same=$(cmp -s "$OUT/owned.safetensors" "$OUT/planned.safetensors" && echo "yes" || echo "NO")
predicted=$(sed -n 's/.*predicted \([-0-9.]*%\) slower per pass.*/+\1/p' "$OUT/planned.log")
measured=$(python3 -c "print(f'{100 * ($planned / $owned - 1):+.1f}%')")
printf "| %s b%s | inspect %.2f GiB | peak %.2f GiB | budget %s GiB | %s ms/it | %s ms/it | %s | %s | %s |\n" \
  "$MODEL" "$BATCH" "$(python3 -c "print($need / 2**30)")" "$(python3 -c "print($peak / 2**30)")" "$budget" \
  "$owned" "$planned" "$measured" "$predicted" "$same"
