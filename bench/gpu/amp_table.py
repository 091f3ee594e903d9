#!/usr/bin/env python3
"""Issue 36's single-GPU table from bench/gpu/run.sh amp: per net, one cgdp worker in fp32 (TF32
convolutions), in bf16, in bf16 again with the cuDNN choices the first stored (bf16_stored: no
search), in bf16 with every activation kept in fp32 (bf16_kept: no packs) and in bf16 with the
convolutions' operands NCHW (bf16_nchw: --layout nchw), next to PyTorch's AMP (autocast bf16 +
channels_last).

Reads, in the logs folder: <model>_b<batch>_<fp32|bf16|bf16_stored|bf16_kept|bf16_nchw>.log (cgdp
train --phase-table) and
<model>_b<batch>_amp.json (bench/gpu/torch_peer.py --amp). Usage: amp_table.py LOGS MODEL:BATCH...
Set-up: the GPU machine (its own CUDA and PyTorch)."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from table import cgdp_run, fmt, read  # noqa: E402  (the bench table's log parser)


def main():
    logs, configs = sys.argv[1], sys.argv[2:]
    print("| net | batch | cgdp fp32+TF32 ms/it | cgdp bf16 ms/it | bf16 no packs ms/it | "
          "bf16 NCHW ms/it | PyTorch AMP ms/it | AMP / cgdp bf16 | cgdp bf16 MiB/wkr | "
          "bf16 stored choices MiB/wkr | no packs MiB/wkr | PyTorch AMP peak MiB |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for c in configs:
        model, batch = c.split(":")
        name = "%s_b%s" % (model, batch)
        fp32, bf16, stored, kept, nchw = (
            cgdp_run(os.path.join(logs, "%s_%s.log" % (name, p)))
            for p in ("fp32", "bf16", "bf16_stored", "bf16_kept", "bf16_nchw"))
        text = read(os.path.join(logs, name + "_amp.json"))
        amp = json.loads(text) if text else {}
        ms = lambda run: run.get("error") or fmt(run.get("total"))
        ratio = (fmt(amp["ms_per_iteration"] / bf16["total"], 2)
                 if "total" in bf16 and "ms_per_iteration" in amp else "-")
        print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            model, batch, ms(fp32), ms(bf16), ms(kept), ms(nchw), fmt(amp.get("ms_per_iteration")),
            ratio, fmt(bf16.get("mib"), 0), fmt(stored.get("mib"), 0), fmt(kept.get("mib"), 0),
            fmt(amp.get("max_memory_mib"), 0)))
    print("\nAMP / cgdp bf16 >= 1: cgdp is as fast or faster (the issue's goal). cgdp: synthetic data,"
          " cuDNN autotuned (--nondeterministic), its batch copied from pinned host memory; PyTorch's"
          " stays on the GPU. MiB/wkr: the device memory cgdp allocated per worker at its peak,"
          " cuDNN's scratch included (not the libraries' own handles); with stored choices no search"
          " runs. PyTorch's: torch.cuda.max_memory_allocated(), its warm-up's searches included.")


if __name__ == "__main__":
    main()
