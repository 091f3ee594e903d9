#!/usr/bin/env python3
"""Merges profiles taken in several rounds into one: every number the median over the rounds,
anything else (names, units, strings) kept from the first. The benches that alternate profiling
and measuring use it (bench/predict_vs_measure.sh, bench/predict_cross_model.sh).
Usage: bench/merge_profiles.py OUT.json IN.json...
Set-up: tools/setup-debian.sh"""
import json
import statistics
import sys


# Optional profile fields that a profile leaves out at these values (docs/profile.md).
DEFAULTS = {"contention_factor": 1, "exchange_stretch": 1, "overlap_us_per_mb": 0, "shared_cores": 0}


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


def merge_profiles(profiles):
    """An optional field one round wrote and another left out counts at its default there."""
    for key, default in DEFAULTS.items():
        if any(key in p for p in profiles):
            for p in profiles:
                p.setdefault(key, default)
    return merge(profiles)


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__.splitlines()[3])
    with open(sys.argv[1], "w") as out:
        json.dump(merge_profiles([json.load(open(f)) for f in sys.argv[2:]]), out, indent=1)
