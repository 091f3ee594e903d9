#!/usr/bin/env bash
# bf16 against fp32 on oneDNN (issue 36), per conv layer of fashion_cnn and AlexNet that runs on
# oneDNN: conv_bench times one fp32 and one bf16 pass of the same convolution back to back in
# every iteration (f32 tensors outside, rounded to bf16 inside: the reorders are counted) and
# reports the median of the paired speedups; this script prints the median over 3 repetitions.
# Usage: bench/conv_bf16_table.sh [path/to/conv_bench] [extra benchmark flags]
# Set-up: tools/setup-debian.sh
set -euo pipefail
bench=${1:-build/bench/conv_bench}
shift || true
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
grep -q avx512_bf16 /proc/cpuinfo && echo "cpu: AVX512_BF16" || echo "cpu: no AVX512_BF16 (oneDNN emulates bf16)"
"$bench" --benchmark_format=json --benchmark_repetitions=3 --benchmark_filter=/bf16/ \
  --benchmark_enable_random_interleaving=true "$@" | PYTHONPATH="$(dirname "$0")" python3 -c '
from bench_tables import median, read_runs
runs = read_runs(lambda name: tuple(name.split("/min_time")[0].split("/bf16/")))
print("%-16s %-9s %10s %10s %8s" % ("layer", "pass", "fp32 GF/s", "bf16 GF/s", "speedup"))
for layer, phase in sorted(runs, key=lambda k: (k[0], k[1] != "forward")):
    print("%-16s %-9s %10.1f %10.1f %8.2f" % (layer, phase, median(runs, (layer, phase), "fp32_GFLOP/s"),
                                             median(runs, (layer, phase), "bf16_GFLOP/s"),
                                             median(runs, (layer, phase), "speedup")))
'
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
