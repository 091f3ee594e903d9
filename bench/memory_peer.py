#!/usr/bin/python3
"""Per-worker training memory: cgdp's accounting next to PyTorch's measured peak, same net and batch.

cgdp: `cgdp inspect --memory --json` (what `train` checks before it allocates): parameters,
gradients, momentum, activations and layer scratch of one worker, and worker 0's total, which
adds the test net. PyTorch: torchvision's model of the same name trained on the CPU in a fresh
process (SGD with momentum, two iterations: the second is the steady state), its peak resident
memory (VmHWM, reset through /proc/self/clear_refs after import) less the resident memory
before the input batch and the model were made (cgdp's accounting holds its input blob too).
That peak holds what cgdp counts, plus PyTorch's workspace. torchvision's AlexNet is not
Caffe's (no LRN, no groups, other widths), so the AlexNet row trains Caffe's AlexNet written with
torch.nn (LRN, grouped convolutions, 227x227 input, the same 60,965,224 parameters). torchvision's GoogLeNet has BatchNorm and no aux heads here; the
parameter counts are printed beside cgdp's.

Usage: bench/memory_peer.py [--cgdp build/cgdp] [--baseline OTHER_CGDP] [--rows alexnet:256,...]
  --baseline  a cgdp built before a change: its accounting as a "before" column.
Set-up: tools/setup-debian.sh --bench (Debian's python3-torch, python3-torchvision).
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROWS = "alexnet:256,googlenet:64,vgg16:32,resnet152:16"
GIB = float(1 << 30)


def resident_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(field + " not in /proc/self/status")


def caffe_alexnet(torch):
    """Caffe's AlexNet (models/alexnet.prototxt) in torch.nn: in-place ReLUs, as Caffe's."""
    nn = torch.nn
    lrn = lambda: nn.LocalResponseNorm(5, alpha=1e-4, beta=0.75)
    relu = lambda: nn.ReLU(inplace=True)
    return nn.Sequential(
        nn.Conv2d(3, 96, 11, stride=4), relu(), lrn(), nn.MaxPool2d(3, 2),
        nn.Conv2d(96, 256, 5, padding=2, groups=2), relu(), lrn(), nn.MaxPool2d(3, 2),
        nn.Conv2d(256, 384, 3, padding=1), relu(),
        nn.Conv2d(384, 384, 3, padding=1, groups=2), relu(),
        nn.Conv2d(384, 256, 3, padding=1, groups=2), relu(), nn.MaxPool2d(3, 2), nn.Flatten(),
        nn.Linear(256 * 6 * 6, 4096), relu(), nn.Dropout(),
        nn.Linear(4096, 4096), relu(), nn.Dropout(), nn.Linear(4096, 1000))


def child(model_name, batch):
    """Runs in its own process: prints PyTorch's peak training bytes and parameter count."""
    import torch
    import torchvision

    torch.manual_seed(0)
    size = 227 if model_name == "alexnet" else 224
    kwargs = {"aux_logits": False, "init_weights": True} if model_name == "googlenet" else {}
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # resets VmHWM to the current resident set
    before = resident_kib("VmRSS")
    # The batch counts, as cgdp's input blob does.
    images = torch.randn(batch, 3, size, size)
    labels = torch.randint(0, 1000, (batch,))
    model = caffe_alexnet(torch) if model_name == "alexnet" else getattr(torchvision.models, model_name)(**kwargs)
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    for _ in range(2):
        optimizer.zero_grad(set_to_none=False)
        loss_fn(model(images), labels).backward()
        optimizer.step()
    peak = resident_kib("VmHWM")
    params = sum(p.numel() for p in model.parameters())
    print(json.dumps({"peak_bytes": (peak - before) * 1024, "parameters": params}))


def cgdp_accounting(binary, model, batch):
    out = subprocess.run([binary, "inspect", "--model", model, "--memory", "--batch", str(batch), "--json"],
                         capture_output=True, text=True, check=True).stdout
    m = json.loads(out)
    train_side = m["parameters"] + m["gradients"] + m["momentum"] + m["activations"] + m["layer_scratch"]
    inspect = subprocess.run([binary, "inspect", "--model", model, "--json"], capture_output=True, text=True,
                             check=True).stdout
    return train_side, m["worker_bytes"][0], json.loads(inspect)["total_params"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cgdp", default=os.path.join(ROOT, "build", "cgdp"))
    parser.add_argument("--baseline", default="")
    parser.add_argument("--rows", default=ROWS)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]))
        return
    print("| model | batch | parameters cgdp / torch | cgdp train side | cgdp worker 0 (+ test net) | "
          "PyTorch peak | cgdp / PyTorch (train side) |" + (" before: train side / worker 0 |" if args.baseline else ""))
    print("|---|---|---|---|---|---|---|" + ("---|" if args.baseline else ""))
    for row in args.rows.split(","):
        model, batch = row.split(":")
        train_side, worker0, ours = cgdp_accounting(args.cgdp, model, int(batch))
        run = subprocess.run(["/usr/bin/python3", os.path.abspath(__file__), "--child", model, batch],
                             capture_output=True, text=True)
        if run.returncode != 0:
            sys.exit(f"memory_peer: PyTorch's {model} at batch {batch} failed:\n{run.stderr[-2000:]}")
        torch_row = json.loads(run.stdout.strip().splitlines()[-1])
        line = (f"| {model} | {batch} | {ours / 1e6:.1f}M / {torch_row['parameters'] / 1e6:.1f}M | "
                f"{train_side / GIB:.2f} GiB | {worker0 / GIB:.2f} GiB | {torch_row['peak_bytes'] / GIB:.2f} GiB | "
                f"**{train_side / torch_row['peak_bytes']:.2f}x** |")
        if args.baseline:
            old_train, old_worker0, _ = cgdp_accounting(args.baseline, model, int(batch))
            line += f" {old_train / GIB:.2f} / {old_worker0 / GIB:.2f} GiB |"
        print(line, flush=True)


if __name__ == "__main__":
    main()
