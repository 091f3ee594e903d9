#!/usr/bin/env bash
# `cgdp time` and `cgdp profile` on one model, alternated ROUNDS times (issue 34): forward and
# backward totals (ms) of each run, so the difference between the commands is read against each
# one's own spread from run to run.
# Usage: bench/time_vs_profile.sh [model] [batch] [rounds] (default: alexnet 16 3)
# Set-up: tools/setup-debian.sh
set -euo pipefail
model=${1:-alexnet}
batch=${2:-16}
rounds=${3:-3}
cgdp=${CGDP:-build/cgdp}
flags="--model $model --data synthetic --batch $batch --iterations 5 --warmup 1"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-8s %-8s %10s %10s\n' run command "fwd ms" "bwd ms"
for k in $(seq "$rounds"); do
  # shellcheck disable=SC2086
  "$cgdp" time $flags > "$tmp/time.txt" 2>/dev/null
  # shellcheck disable=SC2086
  "$cgdp" profile $flags --repeats 2 --out "$tmp/profile.json" > /dev/null 2>&1
  python3 - "$tmp" "$k" <<'PY'
import json, sys
tmp, run = sys.argv[1], sys.argv[2]
forward = backward = 0.0
for line in open(tmp + '/time.txt'):  # rows: name, type, forward ms, backward ms, params MiB
    f = line.split()
    if len(f) == 5 and f[0] not in ('layer', 'all'):
        forward, backward = forward + float(f[2]), backward + float(f[3])
print('%-8s %-8s %10.1f %10.1f' % (run, 'time', forward, backward))
layers = json.load(open(tmp + '/profile.json'))['layers']
print('%-8s %-8s %10.1f %10.1f' % (run, 'profile', sum(l['forward_us'] for l in layers) / 1e3,
                                   sum(l['backward_us'] for l in layers) / 1e3))
PY
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
