#!/usr/bin/env python3
"""Where an offloaded iteration's time goes, from `cgdp train --timeline T`: for worker 0's last
whole iteration (from the end of one update to the end of the next), each track's busy time, the
bytes the offload tracks moved and their rate while busy, and how long compute was idle.
Usage: bench/offload_timeline.py TIMELINE.json
Set-up: tools/setup-debian.sh"""
import json
import sys


def main():
    events = json.load(open(sys.argv[1]))["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in events
             if e.get("ph") == "M" and e.get("name") == "thread_name" and e.get("pid") == 0}
    spans = [e for e in events if e.get("ph") == "X" and e.get("pid") == 0]
    updates = sorted(e["ts"] + e["dur"] for e in spans if e.get("cat") == "update")
    if len(updates) < 2:
        sys.exit("offload_timeline.py: fewer than two updates on worker 0: no whole iteration")
    start, end = updates[-2], updates[-1]
    print("worker 0, last iteration: %.1f ms" % ((end - start) / 1e3))
    print("%-12s %10s %10s %8s" % ("track", "busy ms", "MiB", "GB/s"))
    for tid, name in sorted(names.items()):
        inside = [e for e in spans if e["tid"] == tid and start <= e["ts"] < end]
        busy = sum(min(e["ts"] + e["dur"], end) - e["ts"] for e in inside)
        moved = sum(e.get("args", {}).get("bytes", 0) for e in inside)
        rate = "%.1f" % (moved / busy / 1e3) if moved and busy else ""
        print("%-12s %10.1f %10.1f %8s" % (name, busy / 1e3, moved / 2**20, rate))
        if name == "compute":
            print("%-12s %10.1f" % ("compute idle", (end - start - busy) / 1e3))


if __name__ == "__main__":
    main()
