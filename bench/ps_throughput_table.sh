#!/usr/bin/env bash
# Runs ps_throughput_bench and prints, per chunk size, the plain TCP echo's GB/s and, for 1-4
# shards, push+pull GB/s, its ratio to TCP (target: >= 0.8 from 1 MiB up) and the ratio of bytes
# per CPU-second of the whole process (less disturbed by other load). Each figure is the best of 3
# repetitions run in random order, so a shared machine's changing load hits both alike; later
# flags override these (e.g. --benchmark_repetitions=1). Ends with `uptime`.
# Usage: bench/ps_throughput_table.sh [path/to/ps_throughput_bench] [extra benchmark flags]
set -euo pipefail
bench=${1:-build/bench/ps_throughput_bench}
shift || true
"$bench" --benchmark_format=json --benchmark_repetitions=3 \
  --benchmark_enable_random_interleaving=true "$@" | python3 -c '
import json, re, sys

def arg(name, key):
    return int(re.search(key + r":(\d+)", name).group(1))

def size_text(n):
    return "%d MiB" % (n >> 20) if n >= 1 << 20 else "%d KiB" % (n >> 10)

runs = [b for b in json.load(sys.stdin)["benchmarks"] if b.get("run_type") == "iteration"]
wall, cpu = {}, {}  # GB/s against wall time, and against the process CPU time
for b in runs:
    n = arg(b["name"], "bytes")
    key = (n, 0) if b["name"].startswith("BM_TcpEcho") else (n, arg(b["name"], "shards"))
    scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[b["time_unit"]]
    wall[key] = max(b["bytes_per_second"] / 1e9, wall.get(key, 0))
    cpu[key] = max(2 * n / (b["cpu_time"] * scale) / 1e9, cpu.get(key, 0))
sizes = sorted({n for n, _ in wall})
counts = sorted({s for _, s in wall if s})
print("%8s %8s" % ("chunk", "TCP GB/s") +
      "".join("  %8s %5s %5s" % ("S=%d GB/s" % s, "ratio", "cpu") for s in counts))
for n in sizes:
    cells = "".join("  %8.2f %5.2f %5.2f" % (wall[n, s], wall[n, s] / wall[n, 0],
                                            cpu[n, s] / cpu[n, 0]) for s in counts)
    print("%8s %8.2f" % (size_text(n), wall[n, 0]) + cells)
'
echo "load: $(uptime)"
