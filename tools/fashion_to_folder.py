#!/usr/bin/python3
"""Writes an IDX data set (Fashion-MNIST by default) as an image folder: OUT/train/<class>/*.png
and OUT/val/<class>/*.png (or .jpg), the layout `cgdp train --data folder:OUT` and torchvision's
ImageFolder read. Class folders are "<label>-<name>", so sorting them by name keeps the labels.

Set-up: tools/setup-debian.sh (python3-pil).
Usage: tools/fashion_to_folder.py OUT [--idx DIR] [--format png|jpg] [--quality Q] [--limit N]
"""
import argparse
import gzip
import os
import struct
import sys

from PIL import Image

FASHION = ["tshirt", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag",
           "boot"]


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    zero, kind, dims = struct.unpack(">HBB", data[:4])
    if zero != 0 or kind != 0x08:
        sys.exit(f"{path}: not an IDX file of unsigned bytes")
    shape = struct.unpack(">" + "I" * dims, data[4:4 + 4 * dims])
    return shape, data[4 + 4 * dims:]


def find(directory, stem):
    for name in (stem + ".gz", stem):
        if os.path.exists(os.path.join(directory, name)):
            return os.path.join(directory, name)
    sys.exit(f"{directory}: no {stem}[.gz]")


def write_split(idx_dir, prefix, out, fmt, quality, limit):
    (n, h, w), pixels = read_idx(find(idx_dir, f"{prefix}-images-idx3-ubyte"))
    (m,), labels = read_idx(find(idx_dir, f"{prefix}-labels-idx1-ubyte"))
    if m != n:
        sys.exit(f"{idx_dir}: {n} {prefix} images but {m} labels")
    n = min(n, limit) if limit else n
    names = [f"{k}-{FASHION[k]}" for k in range(10)]
    for name in names:
        os.makedirs(os.path.join(out, name), exist_ok=True)
    for i in range(n):
        image = Image.frombytes("L", (w, h), pixels[i * h * w:(i + 1) * h * w])
        path = os.path.join(out, names[labels[i]], f"{i:05d}.{fmt}")
        if fmt == "jpg":
            image.save(path, quality=quality)
        else:
            image.save(path)
    return n


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--idx", default="/usr/share/datasets/fashion-mnist")
    parser.add_argument("--format", choices=["png", "jpg"], default="png")
    parser.add_argument("--quality", type=int, default=95)
    parser.add_argument("--limit", type=int, default=0, help="at most N images per split")
    a = parser.parse_args()
    for prefix, split in (("train", "train"), ("t10k", "val")):
        n = write_split(a.idx, prefix, os.path.join(a.out, split), a.format, a.quality, a.limit)
        print(f"{os.path.join(a.out, split)}: {n} images")


if __name__ == "__main__":
    main()
