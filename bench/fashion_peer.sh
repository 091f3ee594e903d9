#!/usr/bin/env bash
# Compares cgdp's and PyTorch's CPU training throughput (images/s) on models/fashion_cnn.prototxt:
# same net, batch, threads and iteration count, Fashion-MNIST in memory, runs alternated so that
# noise from other processes hits both. Needs tools/setup-debian.sh --bench (python3-torch).
# Usage: bench/fashion_peer.sh [-t THREADS] [-b BATCH] [-i ITERATIONS] [-r ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
threads=$(nproc) batch=64 iterations=200 rounds=2
while getopts "t:b:i:r:h" opt; do
  case $opt in
    t) threads=$OPTARG ;;
    b) batch=$OPTARG ;;
    i) iterations=$OPTARG ;;
    r) rounds=$OPTARG ;;
    *) sed -n 2,6p "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
  esac
done
# Debian's python3-torch is installed for the system interpreter, not for a pyenv one on PATH.
python=/usr/bin/python3
warmup=20  # cgdp: the first display window; torch: untimed iterations before timing
[[ -x build/cgdp ]] || tools/build.sh cgdp >&2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# cgdp's rate over the display windows after the first: images / seconds between their points.
cgdp_rate() {
  build/cgdp train --iterations $((warmup + iterations)) --batch "$batch" --threads "$threads" \
    --test-interval -1 --test-samples 100 --display "$warmup" --metrics "$work/cgdp.jsonl" \
    --plain >"$work/cgdp.log" 2>&1 || { cat "$work/cgdp.log" >&2; return 1; }
  "$python" -c '
import json, sys
points = [p for p in map(json.loads, open(sys.argv[1])) if p["phase"] == "train"]
first, last = points[0], points[-1]
print((last["iteration"] - first["iteration"]) * int(sys.argv[2]) /
      (last["elapsed_s"] - first["elapsed_s"]))' "$work/cgdp.jsonl" "$batch"
}

torch_rate() {
  "$python" bench/torch_fashion_cnn.py --iterations "$iterations" --warmup "$warmup" \
    --batch "$batch" --threads "$threads" --json >"$work/torch.log" 2>&1 ||
    { cat "$work/torch.log" >&2; return 1; }
  tail -n 1 "$work/torch.log" | "$python" -c 'import json, sys; print(json.load(sys.stdin)["images_per_s"])'
}

echo "fashion_cnn training, batch $batch, $threads threads, $iterations timed iterations" \
  "($warmup warm-up), $rounds rounds; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 1; r <= rounds; ++r)); do
  cgdp=$(cgdp_rate)
  torch=$(torch_rate)
  echo "$cgdp" >>"$work/cgdp.rates"
  echo "$torch" >>"$work/torch.rates"
  printf 'round %d: cgdp %.1f images/s, pytorch %.1f images/s (load average %s)\n' "$r" "$cgdp" \
    "$torch" "$(cut -d' ' -f1 /proc/loadavg)"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
"$python" - "$work/cgdp.rates" "$work/torch.rates" <<'EOF'
import statistics, sys
rates = {name: [float(x) for x in open(path)] for name, path in zip(("cgdp", "pytorch"), sys.argv[1:])}
rounds = len(rates["cgdp"])
print("%-10s" % "framework" + "".join("%10s" % ("round %d" % (r + 1)) for r in range(rounds)) +
      "%10s" % "median" + "   (images/s)")
for name, values in rates.items():
    print("%-10s" % name + "".join("%10.1f" % v for v in values) +
          "%10.1f" % statistics.median(values))
print("cgdp/pytorch: %.2fx" % (statistics.median(rates["cgdp"]) / statistics.median(rates["pytorch"])))
# Each round runs the two back to back, so its own ratio is less moved by the machine's drift.
per_round = [c / t for c, t in zip(rates["cgdp"], rates["pytorch"])]
print("per round: " + " ".join("%.2f" % r for r in per_round) +
      "; their median %.2fx" % statistics.median(per_round))
EOF
