#!/usr/bin/env bash
# Runs host_aggregate_bench and prints, per buffer size and source count N, the summation's GB/s,
# its ratio to a triad on arrays of the same size (target: >= 0.8 from 1 MiB up), and its ratio
# to a triad touching as many bytes as the sum does, so both stream from the same cache level.
# The bench times the sum and both triads back to back in every iteration and reports the median
# of those paired ratios; this script prints the median over 3 repetitions run in random order.
# Later flags override these (e.g. --benchmark_repetitions=5).
# Usage: bench/host_aggregate_table.sh [path/to/host_aggregate_bench] [extra benchmark flags]
# Set-up: tools/setup-debian.sh
set -euo pipefail
bench=${1:-build/bench/host_aggregate_bench}
shift || true
"$bench" --benchmark_format=json --benchmark_repetitions=3 \
  --benchmark_enable_random_interleaving=true "$@" | PYTHONPATH="$(dirname "$0")" python3 -c '
from bench_tables import arg, median, read_runs, size_text
runs = read_runs(lambda name: (arg(name, "bytes"), arg(name, "N")))
sizes = sorted({s for s, _ in runs})
counts = sorted({n for _, n in runs})
print("GB/s of the sum of N buffers; ratio: to the triad on arrays of the same size;")
print("ratio@fp: to a triad whose 3 arrays touch as many bytes as the N + 1 buffers (same footprint)")
print("%8s %10s" % ("size", "triad GB/s") +
      "".join("  %7s %5s %8s" % ("N=%d" % n, "ratio", "ratio@fp") for n in counts))
for s in sizes:
    cells = "".join("  %7.1f %5.2f %8.2f" % tuple(
        median(runs, (s, n), c) for c in ("sum_GB/s", "ratio", "ratio_fp")) for n in counts)
    print("%8s %10.1f" % (size_text(s), median(runs, (s, counts[0]), "triad_GB/s")) + cells)
'
echo "load: $(uptime)"
