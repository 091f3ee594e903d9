#!/usr/bin/env bash
# The cost model against the real thing, on this machine: for fashion_cnn, resnet_small and
# AlexNet (synthetic data, a small batch) and N = 1, 2, 4 workers, profile once (`cgdp profile`),
# predict three chunk plans (layer, all, and two chunks split at the middle param layer) with
# `cgdp predict --json`, and train each plan (`cgdp train --sync cgdp --chunk PLAN`): an iteration's
# time is global batch / images_per_s of its --metrics line (--display 1), warm-up iterations
# dropped, median of the rest. Prints one table, the median |predicted - measured| / measured, and
# per (model, N) the measured time of the plan predicted best against the measured best.
# Usage: bench/predict_vs_measure.sh [measured iterations (5)] [warm-up iterations (2)]
set -euo pipefail
cd "$(dirname "$0")/.."
iterations=${1:-5}
warmup=${2:-2}
tools/build.sh cgdp >/dev/null
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# model:per-worker batch, chosen so that an iteration takes about a second on 2 idle cores.
models="fashion_cnn:32 resnet_small:16 alexnet:2"
echo "cgdp predict vs measure: $(nproc) cores; load average at start $(cut -d' ' -f1-3 /proc/loadavg)"
start=$SECONDS
rows=$out/rows.tsv
: >"$rows"
for entry in $models; do
  model=${entry%%:*}
  batch=${entry##*:}
  for n in 1 2 4; do
    tag=${model}_$n
    build/cgdp profile --model "$model" --data synthetic --devices "$n" --batch "$batch" \
      --iterations "$iterations" --warmup "$warmup" --out "$out/$tag.json" >"$out/$tag.profile.log"
    params=$(build/cgdp predict --model "$model" --profile "$out/$tag.json" --json |
      jq '[.layers[] | select(.param_bytes > 0)] | length')
    for plan in layer all "$((params / 2)),"; do
      predicted=$(build/cgdp predict --model "$model" --profile "$out/$tag.json" --chunk "$plan" --json |
        jq '.cgdp.simulated.iteration_us / 1000')
      build/cgdp train --model "$model" --data synthetic --devices "$n" --batch "$batch" --sync cgdp \
        --chunk "$plan" --iterations $((warmup + iterations)) --display 1 --metrics "$out/$tag.metrics" \
        --test-interval -1 --test-samples 2 --test-batch 2 --plain >"$out/$tag.train.log"
      measured=$(jq -s --argjson w "$warmup" --argjson b $((batch * n)) \
        '[.[] | select(.phase == "train" and .iteration > $w) | 1000 * $b / .images_per_s] | sort |
         if length % 2 == 1 then .[length / 2 | floor] else (.[length / 2 - 1] + .[length / 2]) / 2 end' \
        "$out/$tag.metrics")
      rm -f "$out/$tag.metrics"
      printf '%s\t%s\t%s\t%s\t%s\n' "$model" "$n" "$plan" "$predicted" "$measured" >>"$rows"
    done
  done
done
python3 - "$rows" <<'EOF'
import statistics, sys
rows = [l.split('\t') for l in open(sys.argv[1]).read().splitlines()]
rows = [(m, int(n), p, float(pred), float(meas)) for m, n, p, pred, meas in rows]
print(f"{'model':<14}{'N':>3}  {'plan':<7}{'predicted ms':>14}{'measured ms':>13}{'|error|':>9}")
errors = []
for m, n, p, pred, meas in rows:
    errors.append(abs(pred - meas) / meas)
    print(f"{m:<14}{n:>3}  {p:<7}{pred:>14.1f}{meas:>13.1f}{100 * errors[-1]:>8.1f}%")
print(f"median |predicted - measured| / measured: {100 * statistics.median(errors):.1f}% (target <= 10%)")
print("best of the three plans, per (model, N): predicted best, its measured time against the measured best (target within 5%)")
hits = 0
groups = sorted({(m, n) for m, n, *_ in rows}, key=lambda g: [r[:2] for r in rows].index(g))
for m, n in groups:
    g = [r for r in rows if r[0] == m and r[1] == n]
    pred_best = min(g, key=lambda r: r[3])
    meas_best = min(g, key=lambda r: r[4])
    gap = pred_best[4] / meas_best[4] - 1
    hits += gap <= 0.05
    print(f"  {m:<14}{n:>2}  predicted best {pred_best[2]:<6} measured {pred_best[4]:8.1f} ms; "
          f"measured best {meas_best[2]:<6} {meas_best[4]:8.1f} ms; gap {100 * gap:5.1f}%")
print(f"within 5%: {hits} of {len(groups)}")
EOF
echo "(took $((SECONDS - start)) s; load average at end $(cut -d' ' -f1-3 /proc/loadavg))"
