#!/usr/bin/env bash
# Runs ps_throughput_bench and prints, per chunk size and for 1-4 shards, the plain TCP echo's
# GB/s, push+pull GB/s and their ratio (target: >= 0.8 from 1 MiB up), with the sum read where
# ZeroMQ received it (as the aggregator's H2D copies read it on CPU devices), and `copy`, the
# ratio with the sum copied into the pushed buffer (as it is staged for CUDA devices). The bench
# times an echo and both push+pulls back to back in every iteration and reports the medians of
# those paired ratios; this script prints the median over 3 repetitions run in random order.
# Later flags override these (e.g. --benchmark_repetitions=5). Ends with `uptime`.
# Usage: bench/ps_throughput_table.sh [path/to/ps_throughput_bench] [extra benchmark flags]
# Set-up: tools/setup-debian.sh
set -euo pipefail
bench=${1:-build/bench/ps_throughput_bench}
shift || true
"$bench" --benchmark_format=json --benchmark_repetitions=3 \
  --benchmark_enable_random_interleaving=true "$@" | PYTHONPATH="$(dirname "$0")" python3 -c '
from bench_tables import arg, median, read_runs, size_text
runs = read_runs(lambda name: (arg(name, "bytes"), arg(name, "shards")))
sizes = sorted({n for n, _ in runs})
counts = sorted({s for _, s in runs})
print("%8s" % "chunk" +
      "".join("  %8s %8s %5s %5s" % ("TCP GB/s", "S=%d GB/s" % s, "ratio", "copy") for s in counts))
for n in sizes:
    print("%8s" % size_text(n) + "".join("  %8.2f %8.2f %5.2f %5.2f" % (
        median(runs, (n, s), "tcp_GB/s"), median(runs, (n, s), "ps_GB/s"),
        median(runs, (n, s), "ratio"), median(runs, (n, s), "copy_ratio")) for s in counts))
'
echo "load: $(uptime)"
