#!/usr/bin/python3
"""PyTorch's side of bench/loader_peer.py: torchvision's ImageFolder through a DataLoader with one
of two recipes, measured as cgdp loader measures itself; prints one JSON line.

  caffe: RandomCrop(227) + RandomHorizontalFlip + ToTensor + Normalize (images stored 256x256)
  rrc:   RandomResizedCrop(224) + RandomHorizontalFlip + ToTensor + Normalize

Set-up: tools/setup-debian.sh --bench (python3-torchvision, python3-pil).
"""
import argparse
import json
import time

import torch
import torchvision.datasets as datasets
import torchvision.transforms as T


def recipe(name):
    if name == "caffe":  # Caffe's mean values, in the 0-1 units ToTensor gives, BGR read as RGB
        return T.Compose([T.RandomCrop(227), T.RandomHorizontalFlip(), T.ToTensor(),
                          T.Normalize([123 / 255, 117 / 255, 104 / 255], [1, 1, 1])])
    return T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(),
                      T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--recipe", choices=["caffe", "rrc"], required=True)
    ap.add_argument("--workers", type=int, default=0, help="DataLoader processes; 0: the main one")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seconds", type=float, default=4)
    ap.add_argument("--batches", type=int, default=8)
    args = ap.parse_args()
    torch.set_num_threads(1)  # with --workers 0 the transforms run here, on the one core given
    data = datasets.ImageFolder(args.root, transform=recipe(args.recipe))
    loader = torch.utils.data.DataLoader(data, batch_size=args.batch, shuffle=True,
                                         num_workers=args.workers, drop_last=True,
                                         persistent_workers=args.workers > 0)
    batches = iter(loader)
    for _ in range(max(1, args.workers)):  # warm-up: each worker's first batch, as cgdp's one
        next(batches)
    images, start = 0, time.monotonic()
    taken = 0
    while True:
        seconds = time.monotonic() - start
        if taken >= args.batches and seconds >= args.seconds:
            break
        try:
            x, _ = next(batches)
        except StopIteration:
            batches = iter(loader)
            continue
        images += x.shape[0]
        taken += 1
    print(json.dumps({"images_per_s": images / seconds, "images": images, "seconds": seconds}))


if __name__ == "__main__":
    main()
