#!/usr/bin/env python3
"""Merges profiles taken in several rounds into one: every number the median over the rounds,
anything else (names, units, strings) kept from the first. The benches that alternate profiling
and measuring use it (bench/predict_vs_measure.sh, bench/predict_cross_model.sh).
Usage: bench/merge_profiles.py OUT.json IN.json...
Set-up: tools/setup-debian.sh"""
import json
import statistics
import sys


def merge(values):
    first = values[0]
    if all(v == first for v in values):
        return first
    if isinstance(first, bool) or not isinstance(first, (int, float, dict, list)):
        return first
    if isinstance(first, (int, float)):
        return statistics.median(values)
    if isinstance(first, dict):
        return {k: merge([v[k] for v in values]) for k in first}
    return [merge(list(items)) for items in zip(*values)]


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__.splitlines()[3])
    with open(sys.argv[1], "w") as out:
        json.dump(merge([json.load(open(f)) for f in sys.argv[2:]]), out, indent=1)
