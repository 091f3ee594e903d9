#!/usr/bin/env bash
# Runs conv_bench and prints, per conv layer of fashion_cnn and AlexNet, the layer's forward and
# backward GFLOP/s next to SGEMM's on the same GEMMs (the faster of its serial and OpenMP
# forms) and their ratio (target: >= 0.6). Each figure is the best of 5 repetitions run in
# random order, so a shared machine's changing speed hits the layer and SGEMM alike; later
# flags override these (e.g. --benchmark_repetitions=3).
# Usage: bench/conv_table.sh [path/to/conv_bench] [extra benchmark flags]
set -euo pipefail
bench=${1:-build/bench/conv_bench}
shift || true
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
"$bench" --benchmark_format=json --benchmark_repetitions=5 \
  --benchmark_enable_random_interleaving=true "$@" | python3 -c '
import json, sys
best = {}
for b in json.load(sys.stdin)["benchmarks"]:
    if b.get("run_type") != "iteration":
        continue
    layer, kind = b["run_name"].split("/min_time")[0].rsplit("/", 1)
    best[layer, kind] = max(b["GFLOP/s"], best.get((layer, kind), 0))
layers = list(dict.fromkeys(layer for layer, _ in best))
print("%-15s %9s %9s %6s %9s %9s %6s" %
      ("GFLOP/s", "forward", "sgemm", "ratio", "backward", "sgemm", "ratio"))
for layer in layers:
    cells = []
    for phase in ("forward", "backward"):
        conv = best[layer, "conv_" + phase]
        gemm = max(best[layer, "sgemm_%s_serial" % phase], best[layer, "sgemm_%s_omp" % phase])
        cells.append("%9.1f %9.1f %6.2f" % (conv, gemm, conv / gemm))
    print("%-15s %s %s" % (layer, *cells))
'
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
