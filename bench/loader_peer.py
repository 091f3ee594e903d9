#!/usr/bin/python3
"""cgdp's image loader against PyTorch's DataLoader with torchvision's transforms: images/s per
core on the same JPEG files, the same cores and two recipes, measured in one run.

Images: photo-sized JPEGs (500x375, 375x500 or 500x333, quality 90, 4:2:0) cut from the colour
photographs scikit-image ships (astronaut, coffee, rocket, chelsea, ...): random crops of 40-100%
of a photo, scaled with Lanczos and mirrored at random, in 10 class folders. The Caffe recipe reads
the same crops stored at 256x256, as convert_imageset --resize 256x256 leaves them.

  caffe: cgdp --crop 227 --mirror --mean-value 104,117,123
         torch RandomCrop(227), RandomHorizontalFlip, ToTensor, Normalize
  rrc:   cgdp --augment rrc:224 --mirror --mean-value 123.675,116.28,103.53 --std 58.395,57.12,57.375
         torch RandomResizedCrop(224), RandomHorizontalFlip, ToTensor, Normalize

Both tools run on the same cores (taskset): one core is cgdp with 1 loader thread against PyTorch
with num_workers=0 (the main process decodes); N cores is N loader threads against N worker
processes. The machine's speed drifts, so the two take turns, round after round, each a fresh
process that warms up (one batch per thread or worker) and then measures at least --seconds; the
table gives medians over the rounds and the median of the rounds' ratios.
Set-up: tools/setup-debian.sh --bench (python3-torchvision, python3-skimage, python3-pil).
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PHOTOS = ["astronaut", "coffee", "rocket", "chelsea", "hubble_deep_field", "immunohistochemistry",
          "retina", "stereo_motorcycle"]
SIZES = [(500, 375), (375, 500), (500, 333)]  # width, height: ImageNet's common shapes
RECIPES = {
    "caffe": ["--crop", "227", "--mirror", "--mean-value", "104,117,123"],
    "rrc": ["--augment", "rrc:224", "--mirror", "--mean-value", "123.675,116.28,103.53",
            "--std", "58.395,57.12,57.375"],
}


def photos():
    import numpy as np
    import skimage.data
    out = []
    for name in PHOTOS:
        image = getattr(skimage.data, name)()
        image = image[0] if isinstance(image, tuple) else image  # stereo pairs: the left one
        out.append(np.ascontiguousarray(image[:, :, :3]))
    return out


def make_images(root, count, seed):
    """root/photo/train/<class>/*.jpg and root/caffe256/train/<class>/*.jpg, once."""
    from PIL import Image
    stamp = os.path.join(root, f"made-{count}-{seed}")
    if os.path.exists(stamp):
        return
    rng = random.Random(seed)
    sources = [Image.fromarray(p) for p in photos()]
    for i in range(count):
        src = sources[i % len(sources)]
        w, h = rng.choice(SIZES)
        # The largest box of the target's aspect, scaled to 40-100% of it, somewhere in the photo.
        fit = min(src.width / w, src.height / h) * rng.uniform(0.63, 1.0)
        bw, bh = int(w * fit), int(h * fit)
        x, y = rng.randint(0, src.width - bw), rng.randint(0, src.height - bh)
        crop = src.crop((x, y, x + bw, y + bh))
        if rng.random() < 0.5:
            crop = crop.transpose(Image.FLIP_LEFT_RIGHT)
        for folder, size in (("photo", (w, h)), ("caffe256", (256, 256))):
            path = os.path.join(root, folder, "train", f"class{i % 10}", f"{i:05d}.jpg")
            os.makedirs(os.path.dirname(path), exist_ok=True)
            crop.resize(size, Image.LANCZOS).save(path, quality=90)
    open(stamp, "w").close()


def warm_page_cache(folder):
    for dirpath, _, files in os.walk(folder):
        for f in files:
            with open(os.path.join(dirpath, f), "rb") as fh:
                fh.read()


def cores(n):
    return ",".join(str(c) for c in sorted(os.sched_getaffinity(0))[:n])


def run_json(command):
    r = subprocess.run(command, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"loader_peer: {' '.join(command)} failed:\n{r.stdout}{r.stderr}")
    return json.loads(r.stdout.strip().splitlines()[-1] if not r.stdout.lstrip().startswith("{")
                      else r.stdout)


def cgdp_rate(args, folder, recipe, threads):
    command = ["taskset", "-c", cores(threads), args.cgdp, "loader", "--data", f"folder:{folder}",
               "--batch", str(args.batch), "--seconds", str(args.seconds), "--loader-threads",
               str(threads), "--json"] + RECIPES[recipe]
    return run_json(command)["images_per_s"]


def torch_rate(args, folder, recipe, threads):
    command = ["taskset", "-c", cores(threads), "/usr/bin/python3",
               os.path.join(ROOT, "bench", "torch_loader.py"), "--root", os.path.join(folder, "train"),
               "--recipe", recipe, "--workers", str(0 if threads == 1 else threads),
               "--batch", str(args.batch), "--seconds", str(args.seconds)]
    return run_json(command)["images_per_s"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cgdp", default=os.path.join(ROOT, "build", "cgdp"))
    ap.add_argument("--images", type=int, default=3000, help="JPEGs per set")
    ap.add_argument("--dir", default="/tmp/cgdp_loader_peer")
    ap.add_argument("--threads", default="1,2", help="core counts to compare, e.g. 1,2,4")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=4)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--recipes", default="caffe,rrc")
    args = ap.parse_args()
    make_images(args.dir, args.images, seed=1)
    folders = {"caffe": os.path.join(args.dir, "caffe256"), "rrc": os.path.join(args.dir, "photo")}
    rows = []
    for recipe in args.recipes.split(","):
        warm_page_cache(folders[recipe])
        for threads in (int(t) for t in args.threads.split(",")):
            cg, pt = [], []
            for _ in range(args.rounds):
                cg.append(cgdp_rate(args, folders[recipe], recipe, threads))
                pt.append(torch_rate(args, folders[recipe], recipe, threads))
                print(f"  {recipe} x{threads}: cgdp {cg[-1]:.0f}  torch {pt[-1]:.0f} images/s",
                      file=sys.stderr, flush=True)
            ratios = [c / p for c, p in zip(cg, pt)]
            rows.append((recipe, threads, statistics.median(cg), statistics.median(pt),
                         statistics.median(ratios), min(ratios), max(ratios)))
    print(f"\n{args.images} JPEGs a set, batch {args.batch}, {args.rounds} rounds of >= "
          f"{args.seconds:g} s each, medians\n")
    print("| recipe | cores | cgdp images/s | PyTorch images/s | cgdp per core | PyTorch per core "
          "| cgdp / PyTorch (min-max over rounds) |")
    print("|---|---|---|---|---|---|---|")
    for recipe, threads, c, p, r, lo, hi in rows:
        print(f"| {recipe} | {threads} | {c:.0f} | {p:.0f} | {c / threads:.0f} | {p / threads:.0f} "
              f"| **{r:.2f}x** ({lo:.2f}-{hi:.2f}) |")


if __name__ == "__main__":
    main()
