#!/usr/bin/env bash
# The cost model held out across models, on this machine's CPU backend: for N = 1, 2, 4 workers,
# profile fashion_cnn (the machine: copies, sync point, host sums, update rate, contention), then
# for every model profile its own per-layer compute and predict its iteration with the machine
# terms of fashion_cnn's profile; measure the same run side by side. Also predicts from the
# model's own whole profile (in-sample), for comparison. This machine's speed swings by up to 2x
# within a minute, so profiles and measurements alternate in ROUNDS (3) rounds, as
# bench/predict_vs_measure.sh does: each round profiles the machine model and every model and
# measures every plan once; the prediction uses each profile's median over rounds, the measured
# time is the median of the rounds' medians. Prints one table and the median and worst
# |predicted - measured| / measured of both.
# The runs are tools/chunk_tuner's (cgdp, one worker too), so predict takes --sync cgdp.
# Usage: bench/predict_cross_model.sh [measured iterations (5)] [warm-up iterations (2)]
# Env: MODELS ("fashion_cnn:32 resnet_small:16 alexnet:2"), DEVICES ("1 2 4"), PLANS ("layer all"),
# ROUNDS (3)
# Set-up: tools/setup-debian.sh
set -euo pipefail
cd "$(dirname "$0")/.."
iterations=${1:-5}
warmup=${2:-2}
tools/build.sh cgdp chunk_tuner >/dev/null
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
models=${MODELS:-"fashion_cnn:32 resnet_small:16 alexnet:2"}
plans=(${PLANS:-layer all})
machine_model=${models%% *}
echo "cgdp predict, held out across models: $(nproc) cores; machine terms from ${machine_model%%:*}; load $(cut -d' ' -f1-3 /proc/loadavg)"
profile() {  # model batch n out
  build/cgdp profile --model "$1" --data synthetic --devices "$3" --oversubscribe --batch "$2" \
    --iterations "$iterations" --warmup "$warmup" --out "$4" >/dev/null
}
rows=$out/rows.tsv
: >"$rows"
rounds=${ROUNDS:-3}
for n in ${DEVICES:-1 2 4}; do
  for ((r = 0; r < rounds; ++r)); do
    profile "${machine_model%%:*}" "${machine_model##*:}" "$n" "$out/machine_$n.r$r.json"
    for entry in $models; do
      model=${entry%%:*} batch=${entry##*:}
      profile "$model" "$batch" "$n" "$out/${model}_$n.r$r.json"
      build/tools/chunk_tuner/chunk_tuner --model "$model" --data synthetic --devices "$n" --oversubscribe \
        --batch "$batch" --plans "${plans[@]}" --interval $((warmup + iterations)) --warmup "$warmup" \
        --rounds 1 --seed "$((r + 1))" >"$out/${model}_$n.tuner.log" 2>&1
      for plan in "${plans[@]}"; do
        measured=$(awk -v p="$plan" '$1 == p && NF >= 4 {print $4; exit}' "$out/${model}_$n.tuner.log")
        [[ -n $measured ]] || { cat "$out/${model}_$n.tuner.log" >&2; exit 1; }
        echo "$measured" >>"$out/${model}_$n.$plan.times"
      done
    done
  done
  bench/merge_profiles.py "$out/machine_$n.json" "$out"/machine_$n.r*.json
  for entry in $models; do
    model=${entry%%:*}
    own=$out/${model}_$n.json
    bench/merge_profiles.py "$own" "$out/${model}_$n".r*.json
    # The model's layers (its own compute) with every machine term of the first model's profile.
    python3 - "$own" "$out/machine_$n.json" "$out/${model}_$n.cross.json" <<'CROSS'
import json, sys
own, machine = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
model_terms = {"version", "model", "backend", "device", "devices", "batch", "layers", "loader"}
merged = {k: v for k, v in own.items() if k in model_terms}
merged.update({k: v for k, v in machine.items() if k not in model_terms})
json.dump(merged, open(sys.argv[3], "w"), indent=1)
CROSS
    for plan in "${plans[@]}"; do
      measured=$(sort -g "$out/${model}_$n.$plan.times" | awk '{v[NR] = $1} END {
        print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}')
      cross=$(build/cgdp predict --model "$model" --profile "$out/${model}_$n.cross.json" --chunk "$plan" --sync cgdp --json |
        jq '.cgdp.simulated.iteration_us / 1000')
      in_sample=$(build/cgdp predict --model "$model" --profile "$own" --chunk "$plan" --sync cgdp --json |
        jq '.cgdp.simulated.iteration_us / 1000')
      printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$model" "$n" "$plan" "$measured" "$cross" "$in_sample" >>"$rows"
    done
  done
done
python3 - "$rows" <<'TABLE'
import statistics, sys
rows = [line.split("\t") for line in open(sys.argv[1]).read().splitlines()]
print("| model | N | plan | measured ms | held out ms | error | in-sample ms | error |")
print("|---|---|---|---|---|---|---|---|")
cross, own = [], []
for model, n, plan, measured, held, ins in rows:
    m, h, i = float(measured), float(held), float(ins)
    cross.append(abs(h - m) / m)
    own.append(abs(i - m) / m)
    print(f"| {model} | {n} | {plan} | {m:.2f} | {h:.2f} | {(h - m) / m:+.1%} | {i:.2f} | {(i - m) / m:+.1%} |")
print(f"held out: median {statistics.median(cross):.1%}, worst {max(cross):.1%}; "
      f"in-sample: median {statistics.median(own):.1%}, worst {max(own):.1%} ({len(rows)} runs)")
TABLE
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
