#!/usr/bin/python3
"""cgdp predict's loader stage against training where the loader is the bottleneck, on the CPU.

fashion_cnn (1x28x28, cheap to train) reads photo-sized PNGs (500x375 and the like, no DCT
scaling to help) resized to 28x28: decoding, not the net, sets the pace. `cgdp profile` measures
the loader's rate per thread beside the layers; `cgdp predict --loader-threads T` says whether T
threads keep up and, when not, the iteration time the loader allows; `cgdp train` with T threads
measures it (mean iteration time after a warm-up, from --metrics). T threads share this machine's
cores with the worker, so the prediction (threads add up, each on a core of its own) is the floor.
Set-up: tools/setup-debian.sh --bench (python3-skimage, python3-pil).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import loader_peer  # noqa: E402  (the photos and their crops)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def make_pngs(root, train, val):
    from PIL import Image
    loader_peer.make_images(os.path.join(root, "jpeg"), train + val, seed=1)
    source = os.path.join(root, "jpeg", "photo", "train")
    files = sorted(os.path.join(d, f) for d, _, fs in os.walk(source) for f in fs)
    for i, path in enumerate(files[:train + val]):
        split = "train" if i < train else "val"
        out = os.path.join(root, "png", split, f"class{i % 4}", f"{i:05d}.png")
        if not os.path.exists(out):
            os.makedirs(os.path.dirname(out), exist_ok=True)
            Image.open(path).save(out)
    return os.path.join(root, "png")


def run(command):
    r = subprocess.run(command, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"predict_loader: {' '.join(command)} failed:\n{r.stdout}{r.stderr}")
    return r.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cgdp", default=os.path.join(ROOT, "build", "cgdp"))
    ap.add_argument("--dir", default="/tmp/cgdp_predict_loader")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--iterations", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=5)
    args = ap.parse_args()
    data = "folder:" + make_pngs(args.dir, train=600, val=40)
    common = ["--data", data, "--resize", "28x28", "--batch", str(args.batch)]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        profile = os.path.join(tmp, "profile.json")
        run([args.cgdp, "profile", *common, "--loader-threads", "1", "-o", profile])
        for threads in (int(t) for t in args.threads.split(",")):
            predicted = json.loads(run([args.cgdp, "predict", "--profile", profile, "--json",
                                        "--loader-threads", str(threads)]))
            metrics = os.path.join(tmp, f"metrics{threads}.jsonl")
            run([args.cgdp, "train", *common, "--loader-threads", str(threads), "--iterations",
                 str(args.iterations), "--display", "1", "--test-interval", "-1", "--test-samples",
                 str(args.batch), "--plain", "--metrics", metrics])
            points = [json.loads(line) for line in open(metrics)]
            elapsed = {p["iteration"]: p["elapsed_s"] for p in points if p["phase"] == "train"}
            measured_ms = (elapsed[args.iterations] - elapsed[args.warmup]) / (
                args.iterations - args.warmup) * 1e3
            loader = predicted["loader"]
            rows.append((threads, predicted["cgdp"]["simulated"]["iteration_us"] / 1e3,
                         loader["iteration_us"] / 1e3, loader["loader_bound"], loader["threads_needed"],
                         measured_ms))
        rate = json.load(open(profile))["loader"]["images_per_s_per_thread"]
    print(f"\nfashion_cnn, batch {args.batch}, {data} resized to 28x28; loader measured by cgdp profile: "
          f"{rate:.0f} images/s per thread\n")
    print("| loader threads | workers' iteration (predicted) | with the loader (predicted) | "
          "loader-bound? | threads to keep up | measured iteration | measured / predicted |")
    print("|---|---|---|---|---|---|---|")
    for threads, compute, with_loader, bound, needed, measured in rows:
        print(f"| {threads} | {compute:.1f} ms | {with_loader:.1f} ms | {'yes' if bound else 'no'} "
              f"| {needed} | {measured:.1f} ms | {measured / with_loader:.2f} |")


if __name__ == "__main__":
    main()
