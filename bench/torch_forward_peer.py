#!/usr/bin/python3
"""PyTorch's state_dict loaded into Caffe's published model files: the same forward output?

For each model (Caffe's LeNet, CIFAR-10 quick and CaffeNet deploy files, as BVLC published them),
an equal PyTorch module with its default random initialisation writes its state_dict as
safetensors; `cgdp forward` loads it into the Caffe file (LeNet and CIFAR-10 by PyTorch's own
names, `<module>.weight`/`.bias`; CaffeNet, an nn.Sequential, through a --weights-map file) and runs
the same random inputs. Both float32 outputs are compared with PyTorch's float64 forward of the
same weights: "same to float32 rounding" means cgdp's distance from the float64 answer is of the
size of PyTorch's own. Errors are max |a - b| / max |b| over the blob.

Usage: bench/torch_forward_peer.py [--cgdp build/cgdp] [--check]
  --check  exit 1 unless every cgdp error is at most 1e-5 and at most 10x PyTorch's own.
Set-up: tools/setup-debian.sh --bench (Debian's python3-torch, python3-numpy).
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
import torch
from torch import nn

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = os.path.join(ROOT, "tests", "data", "caffe-models")


def write_safetensors(path, tensors):
    """The safetensors format: 8-byte header length, JSON header, raw little-endian float32."""
    header, blobs, offset = {}, [], 0
    for name, value in tensors.items():
        data = np.ascontiguousarray(value.detach().cpu().numpy(), dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(value.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (length,) = struct.unpack("<Q", raw[:8])
    header, data = json.loads(raw[8:8 + length]), raw[8 + length:]
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        out[name] = np.frombuffer(data[begin:end], dtype="<f4").reshape(entry["shape"])
    return out


class LeNet(nn.Module):
    """examples/mnist/lenet.prototxt; attributes named as its layers."""

    def __init__(self):
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(1, 20, 5), nn.Conv2d(20, 50, 5)
        self.ip1, self.ip2 = nn.Linear(800, 500), nn.Linear(500, 10)

    def forward(self, x):
        x = nn.functional.max_pool2d(self.conv1(x), 2, 2, ceil_mode=True)
        x = nn.functional.max_pool2d(self.conv2(x), 2, 2, ceil_mode=True)
        logits = self.ip2(torch.relu(self.ip1(x.flatten(1))))
        return {"ip2": logits, "prob": torch.softmax(logits, 1)}


class CifarQuick(nn.Module):
    """examples/cifar10/cifar10_quick.prototxt (Caffe pools with ceil, as ceil_mode)."""

    def __init__(self):
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(3, 32, 5, padding=2), nn.Conv2d(32, 32, 5, padding=2)
        self.conv3 = nn.Conv2d(32, 64, 5, padding=2)
        self.ip1, self.ip2 = nn.Linear(1024, 64), nn.Linear(64, 10)

    def forward(self, x):
        f = nn.functional
        x = torch.relu(f.max_pool2d(self.conv1(x), 3, 2, ceil_mode=True))
        x = f.avg_pool2d(torch.relu(self.conv2(x)), 3, 2, ceil_mode=True)
        x = f.avg_pool2d(torch.relu(self.conv3(x)), 3, 2, ceil_mode=True)
        logits = self.ip2(self.ip1(x.flatten(1)))
        return {"ip2": logits, "prob": torch.softmax(logits, 1)}


class CaffeNet(nn.Module):
    """models/bvlc_reference_caffenet/deploy.prototxt as torchvision writes AlexNet: nn.Sequential
    blocks, so its state_dict names ("features.0.weight") need a map."""

    # PyTorch's module index in `features` / `classifier` -> Caffe's layer name.
    NAMES = {"features.0": "conv1", "features.4": "conv2", "features.8": "conv3", "features.10": "conv4",
             "features.12": "conv5", "classifier.0": "fc6", "classifier.3": "fc7", "classifier.6": "fc8"}

    def __init__(self):
        super().__init__()
        lrn = lambda: nn.LocalResponseNorm(5, alpha=1e-4, beta=0.75, k=1.0)
        pool = lambda: nn.MaxPool2d(3, 2, ceil_mode=True)
        self.features = nn.Sequential(
            nn.Conv2d(3, 96, 11, stride=4), nn.ReLU(), pool(), lrn(),
            nn.Conv2d(96, 256, 5, padding=2, groups=2), nn.ReLU(), pool(), lrn(),
            nn.Conv2d(256, 384, 3, padding=1), nn.ReLU(),
            nn.Conv2d(384, 384, 3, padding=1, groups=2), nn.ReLU(),
            nn.Conv2d(384, 256, 3, padding=1, groups=2), nn.ReLU(), pool())
        self.classifier = nn.Sequential(
            nn.Linear(9216, 4096), nn.ReLU(), nn.Dropout(),
            nn.Linear(4096, 4096), nn.ReLU(), nn.Dropout(), nn.Linear(4096, 1000))

    def forward(self, x):
        logits = self.classifier(self.features(x).flatten(1))
        return {"fc8": logits, "prob": torch.softmax(logits, 1)}

    @classmethod
    def weights_map(cls):
        return "".join(f"{module}.{kind} {layer}/{index}\n" for module, layer in cls.NAMES.items()
                       for kind, index in (("weight", 0), ("bias", 1)))


CASES = [  # name, model file, module, input shape, inputs' scale
    ("LeNet", "examples/mnist/lenet.prototxt", LeNet, (8, 1, 28, 28), 1.0),
    ("CIFAR-10 quick", "examples/cifar10/cifar10_quick.prototxt", CifarQuick, (8, 3, 32, 32), 1.0),
    ("CaffeNet", "models/bvlc_reference_caffenet/deploy.prototxt", CaffeNet, (2, 3, 227, 227), 50.0),
]


def relative_error(a, b):
    return float(np.abs(a.astype(np.float64) - b).max() / np.abs(b).max())


def run_case(args, work, name, model_file, module_class, shape, scale):
    torch.manual_seed(1)
    module = module_class().eval()
    inputs = torch.randn(*shape) * scale
    with torch.no_grad():
        ours = {k: v.numpy() for k, v in module(inputs).items()}
        exact = {k: v.numpy() for k, v in module.double()(inputs.double()).items()}
    module.float()
    tag = name.replace(" ", "_")
    weights, data, out = (os.path.join(work, f"{tag}.{kind}.safetensors") for kind in ("state_dict", "input", "out"))
    write_safetensors(weights, module.state_dict())
    write_safetensors(data, {"data": inputs})
    command = [args.cgdp, "forward", "--model", os.path.join(MODELS, model_file), "--weights", weights,
               "--input", data, "--out", out, "--blobs", ",".join(ours)]
    if hasattr(module_class, "weights_map"):
        with open(os.path.join(work, f"{tag}.map"), "w") as f:
            f.write(module_class.weights_map())
        command += ["--weights-map", os.path.join(work, f"{tag}.map")]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"torch_forward_peer: {name}: cgdp forward failed:\n{result.stderr}")
    cgdp = read_safetensors(out)
    params = sum(p.numel() for p in module.parameters())
    rows = []
    for blob in ours:
        if cgdp[blob].shape != ours[blob].shape:
            sys.exit(f"torch_forward_peer: {name}: blob {blob} is {cgdp[blob].shape} in cgdp, {ours[blob].shape} in PyTorch")
        rows.append((name, params, shape[0], blob, relative_error(cgdp[blob], ours[blob]),
                     relative_error(cgdp[blob], exact[blob]), relative_error(ours[blob], exact[blob])))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cgdp", default=os.path.join(ROOT, "build", "cgdp"))
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(os.cpu_count() or 1)
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for case in CASES:
            rows += run_case(args, work, *case)
    print("| model | parameters | batch | blob | cgdp vs PyTorch | cgdp vs float64 | PyTorch vs float64 |")
    print("|---|---|---|---|---|---|---|")
    for name, params, batch, blob, vs_torch, ours_err, torch_err in rows:
        print(f"| {name} | {params:,} | {batch} | {blob} | {vs_torch:.1e} | {ours_err:.1e} | {torch_err:.1e} |")
    bad = [r for r in rows if r[5] > 1e-5 or r[5] > 10 * max(r[6], 1e-7)]
    if args.check and bad:
        sys.exit("torch_forward_peer: beyond float32 rounding: " + ", ".join(f"{r[0]} {r[3]}" for r in bad))


if __name__ == "__main__":
    main()
