#!/usr/bin/python3
"""PyTorch peer of models/fashion_cnn.prototxt: times SGD training on the CPU, data in memory.
Set-up: tools/setup-debian.sh --bench (Debian's python3-torch)."""
import argparse
import gzip
import json
import os
import struct
import time

import torch
from torch import nn

DATA_DIR = "/usr/share/datasets/fashion-mnist"


def read_idx(path):
    """Reads a gzip IDX file (Fashion-MNIST) into a uint8 tensor of its declared shape."""
    with gzip.open(path, "rb") as f:
        raw = f.read()
    _, dtype, rank = struct.unpack(">HBB", raw[:4])
    if dtype != 0x08:
        raise ValueError(f"{path}: expected unsigned-byte IDX data, got type 0x{dtype:02x}")
    dims = struct.unpack(">" + "I" * rank, raw[4:4 + 4 * rank])
    data = torch.frombuffer(bytearray(raw[4 + 4 * rank:]), dtype=torch.uint8)
    return data.reshape(dims)


def load_train_set(data_dir):
    # Scaled by 1/256 as cgdp's IDX reader does, so both see the same input values.
    images = read_idx(os.path.join(data_dir, "train-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(data_dir, "train-labels-idx1-ubyte.gz"))
    return images.unsqueeze(1).float().mul_(1.0 / 256.0).contiguous(), labels.long()


class FashionCNN(nn.Module):
    """conv5x5/32 pad 2, ReLU, max 2 -> conv5x5/64 pad 2, ReLU, max 2 -> fc 256, ReLU, dropout 0.5
    -> fc 10, as in models/fashion_cnn.prototxt (Xavier weights, zero biases like Caffe's fillers)."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(inplace=True), nn.MaxPool2d(2, 2),
            nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(inplace=True), nn.MaxPool2d(2, 2))
        self.classifier = nn.Sequential(
            nn.Flatten(), nn.Linear(64 * 7 * 7, 256), nn.ReLU(inplace=True), nn.Dropout(0.5),
            nn.Linear(256, 10))
        for m in self.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                # Caffe's "xavier" filler: uniform(+-sqrt(3 / fan_in)).
                bound = (3.0 / m.weight[0].numel()) ** 0.5
                nn.init.uniform_(m.weight, -bound, bound)
                nn.init.zeros_(m.bias)

    def forward(self, x):
        return self.classifier(self.features(x))


def make_optimizer(model, lr, momentum, weight_decay):
    # The prototxt gives biases lr_mult 2 and decay_mult 0; weights lr_mult 1, decay_mult 1.
    weights = [p for n, p in model.named_parameters() if n.endswith("weight")]
    biases = [p for n, p in model.named_parameters() if n.endswith("bias")]
    return torch.optim.SGD([{"params": weights, "lr": lr, "weight_decay": weight_decay},
                            {"params": biases, "lr": 2 * lr, "weight_decay": 0.0}],
                           lr=lr, momentum=momentum)


def train(model, optimizer, images, labels, batch, iterations, generator, on_step=None,
          bf16=False):
    """Runs `iterations` SGD steps on shuffled batches, calling on_step() after each; returns
    the last loss. With bf16, forward runs under CPU autocast in bfloat16, as a PyTorch user
    runs mixed precision on the CPU."""
    loss_fn = nn.CrossEntropyLoss()
    order = torch.randperm(images.shape[0], generator=generator)
    per_epoch = images.shape[0] // batch
    loss = None
    for it in range(iterations):
        k = it % per_epoch
        if k == 0 and it > 0:
            order = torch.randperm(images.shape[0], generator=generator)
        index = order[k * batch:(k + 1) * batch]
        x, y = images[index], labels[index]  # a copy per batch, as cgdp's loader makes
        optimizer.zero_grad(set_to_none=False)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        if on_step:
            on_step()
    return loss.item()


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--iterations", type=int, default=200, help="timed iterations")
    ap.add_argument("--warmup", type=int, default=10, help="untimed iterations first")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--weight-decay", type=float, default=5e-4)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--data", default=DATA_DIR, help="folder with the Fashion-MNIST .gz files")
    ap.add_argument("--json", action="store_true", help="also print one JSON line")
    ap.add_argument("--bf16", action="store_true",
                    help="forward under torch.autocast('cpu', bfloat16), channels_last")
    ap.add_argument("--durations", metavar="FILE",
                    help="write each timed iteration's seconds, one per line, as it ends")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    generator = torch.Generator().manual_seed(args.seed)
    images, labels = load_train_set(args.data)
    model = FashionCNN().train()
    if args.bf16:  # autocast's CPU bf16 convolutions (oneDNN) run fastest on channels_last
        model = model.to(memory_format=torch.channels_last)
        images = images.contiguous(memory_format=torch.channels_last)
    optimizer = make_optimizer(model, args.lr, args.momentum, args.weight_decay)

    train(model, optimizer, images, labels, args.batch, args.warmup, generator, bf16=args.bf16)
    durations = open(args.durations, "w", buffering=1) if args.durations else None
    start = last = time.perf_counter()

    def record():
        nonlocal last
        now = time.perf_counter()
        durations.write(f"{now - last:.9f}\n")
        last = now

    loss = train(model, optimizer, images, labels, args.batch, args.iterations, generator,
                 record if durations else None, bf16=args.bf16)
    seconds = time.perf_counter() - start
    rate = args.iterations * args.batch / seconds
    print(f"torch {torch.__version__}: {args.iterations} iterations, batch {args.batch}, "
          f"{torch.get_num_threads()} threads: {rate:.1f} images/s ({seconds:.2f} s, "
          f"last loss {loss:.4f})")
    if args.json:
        print(json.dumps({"framework": "pytorch", "version": torch.__version__,
                          "iterations": args.iterations, "batch": args.batch,
                          "threads": torch.get_num_threads(), "seconds": seconds,
                          "images_per_s": rate, "loss": loss}))


if __name__ == "__main__":
    main()
