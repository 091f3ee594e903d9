"""Shared by the bench/*_table.sh scripts: reads Google Benchmark's JSON from stdin and groups
the repetitions of each case, whose counters the scripts then take medians of."""
import collections
import json
import re
import statistics
import sys


def arg(name, key):
    """The value of `key:N` in a benchmark's name."""
    return int(re.search(key + r":(\d+)", name).group(1))


def size_text(n):
    return "%d MiB" % (n >> 20) if n >= 1 << 20 else "%d KiB" % (n >> 10)


def read_runs(key):
    """Each repetition's result (run_type "iteration"), grouped by key(benchmark name)."""
    runs = collections.defaultdict(list)
    for b in json.load(sys.stdin)["benchmarks"]:
        if b.get("run_type") == "iteration":
            runs[key(b["run_name"])].append(b)
    return runs


def median(runs, key, counter):
    """The median of one counter over a case's repetitions."""
    return statistics.median(b[counter] for b in runs[key])
