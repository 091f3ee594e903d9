#!/usr/bin/env python3
"""PyTorch peer of cgdp's GPU benchmark: torchvision's model, the same batch and image size,
synthetic data already on the GPU, fp32 with cudnn.benchmark on and PyTorch's default math
(TF32 for convolutions, not for matrix products), one iteration = forward + backward + SGD step
(momentum 0.9, weight decay 5e-4). Times the iterations after the warm-up with CUDA events and
prints one JSON line. --amp: autocast bf16 and channels_last, as a PyTorch user runs on a tensor-core
GPU (the loss and the SGD step stay fp32). Usage: torch_peer.py --model resnet152 --batch 16
[--size 224] [--amp] (--model caffe_alexnet: Caffe's AlexNet, 1000 classes, --size 227)
Set-up: the GPU machine (its own CUDA, PyTorch and torchvision)."""
import argparse
import json
import os
import sys

import torch
import torchvision

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from memory_peer import caffe_alexnet  # noqa: E402  (Caffe's AlexNet in torch.nn)

# cgdp's model name -> torchvision's constructor and the extra arguments that match cgdp's net
# (GoogLeNet without the auxiliary heads, as models/googlenet.prototxt); caffe_alexnet is
# models/alexnet.prototxt itself (LRN, grouped convolutions), issue 36's AMP peer for AlexNet.
MODELS = {
    "alexnet": ("alexnet", {}),
    "caffe_alexnet": (None, {}),
    "googlenet": ("googlenet", {"aux_logits": False, "init_weights": False}),
    "vgg16": ("vgg16", {}),
    "resnet152": ("resnet152", {}),
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, choices=sorted(MODELS))
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--classes", type=int, default=1000)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--amp", action="store_true",
                        help="autocast bf16 with channels_last (PyTorch's mixed precision)")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("torch_peer.py: error: PyTorch sees no CUDA GPU")

    torch.backends.cudnn.benchmark = True  # cuDNN's algorithm search, as cgdp's
    name, extra = MODELS[args.model]
    model = (caffe_alexnet(torch) if name is None else
             getattr(torchvision.models, name)(weights=None, num_classes=args.classes, **extra))
    model = model.cuda().train()
    images = torch.randn(args.batch, 3, args.size, args.size, device="cuda")
    if args.amp:
        model = model.to(memory_format=torch.channels_last)
        images = images.contiguous(memory_format=torch.channels_last)
    labels = torch.randint(0, args.classes, (args.batch,), device="cuda")
    loss_fn = torch.nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)

    def step():
        optimizer.zero_grad(set_to_none=False)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=args.amp):
            loss = loss_fn(model(images), labels)
        loss.backward()
        optimizer.step()

    for _ in range(args.warmup):
        step()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(args.iterations):
        step()
    end.record()
    torch.cuda.synchronize()
    ms = start.elapsed_time(end) / args.iterations
    print(json.dumps({
        "model": args.model, "batch": args.batch, "size": args.size,
        "precision": "amp bf16, channels_last" if args.amp else "fp32",
        "ms_per_iteration": ms, "images_per_s": args.batch * 1000.0 / ms,
        "max_memory_mib": torch.cuda.max_memory_allocated() / 2**20,
        "torch": torch.__version__, "torchvision": torchvision.__version__,
        "cudnn": torch.backends.cudnn.version(), "gpu": torch.cuda.get_device_name(),
        "tf32_convolutions": torch.backends.cudnn.allow_tf32,
        "tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
    }))


if __name__ == "__main__":
    main()
