#!/usr/bin/env bash
# Runs conv_bench and prints, per conv layer of fashion_cnn and AlexNet and per CPU engine (gemm:
# im2col + OpenBLAS; onednn: oneDNN, the default for float), the layer's forward and
# backward GFLOP/s next to SGEMM's on the same GEMMs (the faster of its serial and OpenMP forms)
# and their ratio (target: >= 0.6). conv_bench times the layer and both SGEMM forms back to back
# in every iteration and reports the median of those paired ratios; this script prints the median
# over 3 repetitions run in random order. Later flags override these (e.g.
# --benchmark_repetitions=5).
# Usage: bench/conv_table.sh [path/to/conv_bench] [extra benchmark flags]
# Set-up: tools/setup-debian.sh
set -euo pipefail
bench=${1:-build/bench/conv_bench}
shift || true
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
"$bench" --benchmark_format=json --benchmark_repetitions=3 --benchmark_filter=-/bf16/ \
  --benchmark_enable_random_interleaving=true "$@" | PYTHONPATH="$(dirname "$0")" python3 -c '
from bench_tables import median, read_runs
runs = read_runs(lambda name: tuple(name.split("/min_time")[0].rsplit("/", 1)))
layers = list(dict.fromkeys(layer for layer, _ in runs))
print("%-22s %9s %9s %6s %9s %9s %6s" %
      ("GFLOP/s", "forward", "sgemm", "ratio", "backward", "sgemm", "ratio"))
for layer in layers:
    cells = []
    for phase in ("forward", "backward"):
        gemm = max(median(runs, (layer, phase), "sgemm_omp_GFLOP/s"),
                   median(runs, (layer, phase), "sgemm_serial_GFLOP/s"))
        cells.append("%9.1f %9.1f %6.2f" % (median(runs, (layer, phase), "conv_GFLOP/s"), gemm,
                                             median(runs, (layer, phase), "ratio")))
    print("%-22s %s %s" % (layer, *cells))
'
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
