#!/usr/bin/env python3
"""Turns the logs of bench/gpu/run.sh's GPU half into its one table.

Reads, in the results folder: <config>_<sync>_n<N>.log (cgdp train output: the phase table and
the memory line), <config>_torch.json (bench/gpu/torch_peer.py), <config>_copy.json (a cgdp
timeline with every chunk copy) and <config>_plain.jsonl (gpu_copy_bench on the same sizes), and
setup.json. A run that is missing or failed shows as its reason. Usage: table.py RESULTS_DIR
Set-up: the GPU machine (its own CUDA, PyTorch and torchvision)."""
import json
import os
import re
import sys

PHASES = {"forward": "fwd", "backward": "bwd", "exchange after backward": "exch",
          "gradient sum": "sum", "update": "upd", "broadcast": "bcast",
          "total per iteration": "total", "backward, slowest worker": "bwd_last",
          "exchange after last backward": "exch_last"}


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def cgdp_run(path):
    """Phases (ms), device MiB per worker (mean) and the failure, if any, of one cgdp log."""
    text = read(path)
    if text is None:
        return {"error": "not run"}
    if "cgdp: error:" in text or "phases (" not in text:
        lines = [l for l in text.splitlines() if l.strip()]
        errors = [l for l in lines if l.startswith("cgdp: error:")]
        return {"error": (errors or lines or ["no output"])[0][:100]}
    run = {}
    table = text[text.index("phases ("):]
    for line in table.splitlines()[1:10]:
        m = re.match(r"\s+(.+?)\s+(-?[0-9.]+)$", line)
        if m and m.group(1) in PHASES:
            run[PHASES[m.group(1)]] = float(m.group(2))
    # Each worker's device memory at its peak (searches included), else (older logs) at the end.
    mem = re.findall(r"worker \d+ [0-9.]+ MiB device \(peak ([0-9.]+)\)", text) or \
        re.findall(r"worker \d+ ([0-9.]+) MiB device", text)
    if mem:
        run["mib"] = sum(map(float, mem)) / len(mem)
    factors = re.search(r"fully-connected exchange: (.*?) as factors", text)
    run["fc"] = "" if not factors or factors.group(1) == "none" else factors.group(1).replace(" ", "")
    return run


def copy_rates(results, config):
    """GB/s of cgdp's D2H and H2D chunk copies in training, and of plain cudaMemcpy of the same
    sizes, as total bytes over total time."""
    trace = read(os.path.join(results, config + "_copy.json"))
    plain = read(os.path.join(results, config + "_plain.jsonl"))
    if not trace or not plain:
        return None
    spans = {"d2h": [0, 0], "h2d": [0, 0]}
    for e in json.loads(trace)["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") in spans and "bytes" in e.get("args", {}):
            spans[e["cat"]][0] += e["args"]["bytes"]
            spans[e["cat"]][1] += e["dur"] * 1e-6
    plain_times = {}
    for line in plain.splitlines():
        p = json.loads(line)
        plain_times[p["bytes"]] = (p["d2h_ms"] * 1e-3, p["h2d_ms"] * 1e-3)
    sizes = [e["args"]["bytes"] for e in json.loads(trace)["traceEvents"]
             if e.get("cat") == "d2h" and "bytes" in e.get("args", {})]
    plain_bytes = sum(sizes)
    plain_d2h = sum(plain_times[b][0] for b in sizes if b in plain_times)
    plain_h2d = sum(plain_times[b][1] for b in sizes if b in plain_times)
    rate = lambda b, s: b / s / 1e9 if s > 0 else float("nan")
    return (rate(*spans["d2h"]), rate(*spans["h2d"]), rate(plain_bytes, plain_d2h),
            rate(plain_bytes, plain_h2d))


def fmt(value, digits=1):
    return "-" if value is None else ("%.*f" % (digits, value))


def main():
    results = sys.argv[1]
    setup = json.loads(read(os.path.join(results, "setup.json")) or "{}")
    configs = setup.get("configs", [])
    head = ("model", "batch", "N", "sync", "fc", "ms/it", "img/s", "torch ms", "torch img/s",
            "fwd", "bwd", "exch", "exch/bwd", "sum", "upd", "bcast", "MiB/wkr", "D2H GB/s",
            "H2D GB/s")
    rows = []
    for config in configs:
        model, batch = config["model"], config["batch"]
        name = "%s_b%d" % (model, batch)
        torch = json.loads(read(os.path.join(results, name + "_torch.json")) or "null")
        copies = copy_rates(results, name)
        for sync, n in config["runs"]:
            run = cgdp_run(os.path.join(results, "%s_%s_n%d.log" % (name, sync, n)))
            row = [model, str(batch), str(n), sync]
            if "error" in run:
                rows.append(row + [run["error"]])
                continue
            total = run.get("total")
            row += [run.get("fc", ""), fmt(total), fmt(batch * n * 1000 / total if total else None, 0)]
            single = sync == "local"
            row += [fmt(torch["ms_per_iteration"]) if single and torch else "",
                    fmt(torch["images_per_s"], 0) if single and torch else ""]
            row += [fmt(run.get(k)) for k in ("fwd", "bwd", "exch")]
            # The iteration's own share (the cost model's): the exchange left after the last
            # backward over the slowest worker's backward; "exch" is per worker, and holds its
            # wait for the slower workers' backward.
            last, slowest = run.get("exch_last"), run.get("bwd_last")
            share = last / slowest * 100 if last is not None and slowest else None
            row += ["%s%%" % fmt(share, 0) if share is not None and sync != "local" else ""]
            row += [fmt(run.get(k)) for k in ("sum", "upd", "bcast")] + [fmt(run.get("mib"), 0)]
            with_copies = copies and sync == "cgdp" and n == config.get("copy_workers")
            row += (["%s (%s)" % (fmt(copies[0]), fmt(copies[2])),
                     "%s (%s)" % (fmt(copies[1]), fmt(copies[3]))] if with_copies else ["", ""])
            rows.append(row)
    widths = [max(len(r[i]) if i < len(r) else 0 for r in rows + [head]) for i in range(len(head))]
    print(setup.get("title", "cgdp GPU benchmark"))
    print("  ".join(h.rjust(w) for h, w in zip(head, widths)))
    for r in rows:
        print("  ".join(c.rjust(w) for c, w in zip(r, widths)) if len(r) == len(head)
              else "  ".join(c.rjust(w) for c, w in zip(r[:4], widths)) + "  " + r[4])
    for note in setup.get("notes", []):
        print(note)


if __name__ == "__main__":
    main()
