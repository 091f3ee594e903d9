#!/usr/bin/env python3
"""The cost model held out on the CGDP paper's machine (four P100s, Le et al., ICPE 2018).

Calibrates on AlexNet alone (Tables 3 and 4), then predicts VGG-16 and GoogLeNet on four GPUs
(Table 2) from each net's single-GPU time and the AlexNet machine terms, and prints predicted
against measured for both schemes. Paper figures that go in, and nothing else:
  AlexNet, Table 3: forward 50.6 ms, backward 104 ms (classic) and 111 ms (CGDP), update 5.1 ms,
    the exchange left after CGDP's backward 21.8 us;
  AlexNet, Table 4: fc6's copies (151 MB: 12.146 ms D2H, 5.538 ms H2D) and host sum (13.074 ms),
    conv1's copies for the latencies;
  AlexNet, the classic broadcast 20 ms and accumulation 23 ms (Table 3) for the peer links;
  AlexNet, Table 2: the one-GPU time (mean of both frameworks), against Table 3's four-GPU
    compute: what a layer costs more when four GPUs run at once (2.4 ms over 24 layers);
  VGG-16 and GoogLeNet, Table 2: the one-GPU times only (mean of both frameworks), and Table 1's
    batch per GPU (32 and 64).
Each net's compute is spread over its layers as the AlexNet example's is (docs/profile.md):
convolutions and inner products get 90% by arithmetic (parameters x output positions), the
other layers 10% by output size; backward is forward x 104 / 50.6, the Input layer's dropped.
The held-out nets' layers then get AlexNet's four-GPU cost per layer on top (a profile's layer
times are measured with all its workers running, profile.hpp).
Usage: bench/paper_held_out.py [--write] [--cgdp build/cgdp]
  --write   also rewrite docs/examples/profile_{alexnet,vgg16,googlenet}_p100x4.json
Set-up: tools/setup-debian.sh (and tools/build.sh cgdp)"""
import argparse
import json
import math
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FORWARD_MS, BACKWARD_MS, CGDP_BACKWARD_MS, UPDATE_MS = 50.6, 104.0, 111.0, 5.1  # Table 3
LAST_HANDOFF_US = 21.8  # Table 3: CGDP's exchange left after backward
TABLE2 = {  # ms per iteration: (classic, CGDP) with 1 and 4 GPUs; Table 1's batch per GPU
    "alexnet": {"batch": 256, "one": (157.2, 157.4), "four": (202.7, 167.1)},
    "vgg16": {"batch": 32, "one": (345.6, 345.2), "four": (445.6, 369.1)},
    "googlenet": {"batch": 64, "one": (140.0, 140.9), "four": (163.4, 156.7)},
}
# AlexNet's machine terms (docs/profile.md, "Example"): copies from Table 4, peer links from the
# classic scheme's 20 ms broadcast and 23 ms accumulation, update 47.8 GB/s (5.1 ms).
MACHINE = {
    "host_threads": 20,
    "d2h": {"gbps": 12.43, "latency_us": 3}, "h2d": {"gbps": 27.27, "latency_us": 2},
    "p2p": {"gbps": 24.4, "latency_us": 10},
    "host_sum": [{"inputs": 4, "gbps": 11.55}],
    "update_gbps": 47.8, "device_sum_gbps": 163, "host_memory_gbps": 0,
}
DEVICE = "Tesla P100-SXM2-16GB (CGDP paper, sec. 5)"


def run(cgdp, *args):
    return subprocess.run([cgdp, *args], check=True, capture_output=True, text=True).stdout


def layer_costs(cgdp, model, batch, forward_ms, backward_ms):
    """The net's layers with forward_ms and backward_ms spread as the AlexNet example's."""
    layers = json.loads(run(cgdp, "inspect", "--model", model, "--batch", str(batch), "--json"))["layers"]
    size = lambda l: sum(math.prod(shape) for shape in l["tops"].values())
    positions = lambda l: sum(math.prod(shape[2:]) for shape in l["tops"].values())
    heavy = [l["params"] * positions(l) if l["params"] > 0 else 0 for l in layers]
    light = [size(l) if l["params"] == 0 else 0 for l in layers]
    out = []
    for l, h, s in zip(layers, heavy, light):
        share = 0.9 * h / sum(heavy) + 0.1 * s / sum(light)
        out.append({"name": l["name"], "type": l["type"],
                    "forward_us": round(forward_ms * 1e3 * share, 1),
                    "backward_us": 0.0 if l["type"] == "Input" else round(backward_ms * 1e3 * share, 1),
                    "param_bytes": l["params"] * 4})
    return out


def sync_terms(alexnet_layers):
    """Per sync point, and per MB of exchange beside the backward, from AlexNet's 7 ms of CGDP
    backward over the classic one: each hand-off at most what the paper measured for the last
    one, the rest per MB exchanged while layers still computed (every chunk but the last, conv1)."""
    sizes = [l["param_bytes"] for l in alexnet_layers if l["param_bytes"] > 0]
    megabytes = (sum(sizes) - sizes[0]) / 1e6
    per_mb = ((CGDP_BACKWARD_MS - BACKWARD_MS) * 1e3 - len(sizes) * LAST_HANDOFF_US) / megabytes
    return LAST_HANDOFF_US, round(per_mb, 2)


def profile(model, layers, batch, sync_us, overlap_us_per_mb, note):
    p = {"version": 1, "model": model, "backend": "cuda", "device": DEVICE + note, "devices": 4,
         "batch": batch, "host_threads": MACHINE["host_threads"], "layers": layers}
    p.update({k: v for k, v in MACHINE.items() if k != "host_threads"})
    p["sync_us"] = sync_us
    if overlap_us_per_mb > 0:
        p["overlap_us_per_mb"] = overlap_us_per_mb
    return p


def predict(cgdp, model, path):
    out = json.loads(run(cgdp, "predict", "--model", model, "--profile", path, "--chunk", "layer",
                         "--sync", "cgdp", "--json"))
    return out["ps0"]["simulated"]["iteration_us"] / 1e3, out["cgdp"]["simulated"]["iteration_us"] / 1e3


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--cgdp", default=os.path.join(ROOT, "build", "cgdp"))
    args = parser.parse_args()
    alexnet = layer_costs(args.cgdp, "alexnet", 256, FORWARD_MS, BACKWARD_MS)
    sync_us, per_mb = sync_terms(alexnet)
    syncs = sum(1 for l in alexnet if l["param_bytes"] > 0)
    one_term = round((CGDP_BACKWARD_MS - BACKWARD_MS) * 1e3 / syncs, 1)  # the old form: 875 us
    ratio = BACKWARD_MS / FORWARD_MS
    alexnet_one_gpu_ms = sum(TABLE2["alexnet"]["one"]) / 2 - UPDATE_MS
    per_layer_us = (FORWARD_MS + BACKWARD_MS - alexnet_one_gpu_ms) * 1e3 / len(alexnet)
    tmp = os.path.join(os.environ.get("TMPDIR", "/tmp"), "cgdp_paper_held_out")
    os.makedirs(tmp, exist_ok=True)
    rows = []
    for model, paper in TABLE2.items():
        if model == "alexnet":
            alone = layers = alexnet
            note = ""
        else:
            inspected = json.loads(run(args.cgdp, "inspect", "--model", model, "--json"))["layers"]
            update_ms = sum(l["params"] * 4 for l in inspected) / (MACHINE["update_gbps"] * 1e6)
            compute_ms = sum(paper["one"]) / 2 - update_ms
            forward_ms = compute_ms / (1 + ratio)
            alone = layer_costs(args.cgdp, model, paper["batch"], forward_ms, forward_ms * ratio)
            layers = [dict(l, forward_us=round(l["forward_us"] + per_layer_us / (1 + ratio), 1),
                           backward_us=l["backward_us"] if l["type"] == "Input" else
                           round(l["backward_us"] + per_layer_us * ratio / (1 + ratio), 1))
                      for l in alone]
            note = ("; held out: compute from Table 2's one-GPU time plus AlexNet's four-GPU cost"
                    " per layer, machine terms AlexNet's")
        two = profile(model, layers, paper["batch"], sync_us, per_mb, note)
        one = profile(model, layers, paper["batch"], one_term, 0, note)
        single = profile(model, alone, paper["batch"], sync_us, per_mb, note)
        predicted = {}
        for name, p in (("two", two), ("one", one), ("single", single)):
            path = os.path.join(tmp, "%s_%s.json" % (model, name))
            with open(path, "w") as f:
                json.dump(p, f, indent=2)
            predicted[name] = predict(args.cgdp, model, path)
        if args.write:
            with open(os.path.join(ROOT, "docs", "examples", "profile_%s_p100x4.json" % model), "w") as f:
                json.dump(two, f, indent=2)
                f.write("\n")
        for k, scheme in enumerate(("classic (ps0)", "CGDP")):
            measured = paper["four"][k]
            err = lambda v: "%+.1f%%" % ((v - measured) / measured * 100)
            rows.append((model, scheme, "%.1f" % measured, "%.1f" % predicted["two"][k],
                         err(predicted["two"][k]), err(predicted["one"][k]),
                         err(predicted["single"][k]) if model != "alexnet" else "",
                         "in-sample" if model == "alexnet" else "held out"))
    print("The CGDP paper's 4-GPU iterations (Table 2, ms), predicted from an AlexNet-only calibration")
    print("sync point %.1f us; exchange beside backward %.2f us per MB; four GPUs cost %.1f us more"
          " per layer; one-term sync point %.1f us" % (sync_us, per_mb, per_layer_us, one_term))
    head = ("model", "scheme", "paper", "predicted", "error", "one-term sync", "one-GPU layers", "")
    widths = [max(len(str(r[i])) for r in rows + [head]) for i in range(len(head))]
    for r in [head] + rows:
        print("  ".join(str(c).rjust(w) for c, w in zip(r, widths)))


if __name__ == "__main__":
    sys.exit(main())
