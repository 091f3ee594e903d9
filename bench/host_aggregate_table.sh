#!/usr/bin/env bash
# Runs host_aggregate_bench and prints, per buffer size and source count N, the summation's GB/s,
# its ratio to a triad on arrays of the same size (target: >= 0.8 from 1 MiB up), and its ratio
# to a triad touching as many bytes as the sum does, so both stream from the same cache level.
# Each figure is the best of 3 repetitions run in random order, so a shared machine's changing
# load hits every kernel alike; later flags override these (e.g. --benchmark_repetitions=1).
# Usage: bench/host_aggregate_table.sh [path/to/host_aggregate_bench] [extra benchmark flags]
set -euo pipefail
bench=${1:-build/bench/host_aggregate_bench}
shift || true
"$bench" --benchmark_format=json --benchmark_repetitions=3 \
  --benchmark_enable_random_interleaving=true "$@" | python3 -c '
import json, re, sys

def arg(name, key):
    return int(re.search(key + r":(\d+)", name).group(1))

def size_text(n):
    return "%d MiB" % (n >> 20) if n >= 1 << 20 else "%d KiB" % (n >> 10)

runs = [b for b in json.load(sys.stdin)["benchmarks"] if b.get("run_type") == "iteration"]
triad, same_footprint, sums = {}, {}, {}
for b in runs:
    gbs = b["bytes_per_second"] / 1e9
    if b["name"].startswith("BM_TriadSameFootprint"):
        table, key = same_footprint, (arg(b["name"], "bytes"), arg(b["name"], "N"))
    elif b["name"].startswith("BM_Triad"):
        table, key = triad, arg(b["name"], "bytes")
    else:
        table, key = sums, (arg(b["name"], "bytes"), arg(b["name"], "N"))
    table[key] = max(gbs, table.get(key, 0))
counts = sorted({n for _, n in sums})
print("GB/s of the sum of N buffers; ratio: to the triad on arrays of the same size;")
print("ratio@fp: to a triad whose 3 arrays touch as many bytes as the N + 1 buffers (same footprint)")
print("%8s %10s" % ("size", "triad GB/s") +
      "".join("  %7s %5s %8s" % ("N=%d" % n, "ratio", "ratio@fp") for n in counts))
for s in sorted(triad):
    cells = "".join("  %7.1f %5.2f %8.2f" % (sums[s, n], sums[s, n] / triad[s],
                                           sums[s, n] / same_footprint[s, n]) for n in counts)
    print("%8s %10.1f" % (size_text(s), triad[s]) + cells)
'
