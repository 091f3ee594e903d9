#!/usr/bin/python3
"""Prints what CI's time went to: each stage's seconds (tools/stage_timing.sh wrote them to
DIR/stages.tsv) and, from the JUnit files ctest wrote there (DIR/tests-TREE.xml), the test count
of each tree and its slowest tests.
Usage: tools/ci_timings.py DIR [--slowest N]"""
import argparse
import glob
import os
import sys
import xml.etree.ElementTree as ET


def read_stages(folder):
    path = os.path.join(folder, "stages.tsv")
    if not os.path.exists(path):
        return []
    rows = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            fields = line.rstrip("\n").split("\t")
            if len(fields) != 3:
                sys.exit(f"ci_timings.py: {path}:{number}: expected NAME<tab>SECONDS<tab>STATUS")
            rows.append((fields[0], int(fields[1]), int(fields[2])))
    return rows


def read_tests(folder):
    """(tree, name, seconds, outcome) for every test case of every JUnit file."""
    tests = []
    for path in sorted(glob.glob(os.path.join(folder, "tests-*.xml"))):
        tree = os.path.basename(path)[len("tests-"):-len(".xml")]
        try:
            root = ET.parse(path).getroot()
        except ET.ParseError as e:
            sys.exit(f"ci_timings.py: {path}: not JUnit XML ({e})")
        for case in root.iter("testcase"):
            if case.find("skipped") is not None:
                outcome = "skipped"
            elif case.find("failure") is not None or case.find("error") is not None:
                outcome = "failed"
            else:
                outcome = "passed"
            tests.append((tree, case.get("name", "?"), float(case.get("time", 0)), outcome))
    return tests


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\nUsage:")[0])
    parser.add_argument("folder")
    parser.add_argument("--slowest", type=int, default=15)
    args = parser.parse_args()
    stages = read_stages(args.folder)
    print("CI timing (seconds)")
    for name, seconds, status in stages:
        print("  %-44s %6d%s" % (name, seconds, "" if status == 0 else "  (exit %d)" % status))
    print("  %-44s %6d" % ("total of the stages", sum(s for _, s, _ in stages)))
    tests = read_tests(args.folder)
    trees = sorted({t for t, _, _, _ in tests})
    for tree in trees:
        mine = [x for x in tests if x[0] == tree]
        counts = {o: sum(1 for x in mine if x[3] == o) for o in ("passed", "failed", "skipped")}
        print("tests in %-12s %4d: %d passed, %d failed, %d skipped; %.0f s of test time" % (
            tree, len(mine), counts["passed"], counts["failed"], counts["skipped"],
            sum(x[2] for x in mine)))
    if tests:
        print("slowest %d tests" % min(args.slowest, len(tests)))
        for tree, name, seconds, outcome in sorted(tests, key=lambda x: -x[2])[:args.slowest]:
            print("  %7.1f  %-10s %s%s" % (seconds, tree, name,
                                            "" if outcome == "passed" else "  (%s)" % outcome))


if __name__ == "__main__":
    main()
