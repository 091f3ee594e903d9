#!/usr/bin/python3
"""Checks that each folder of src/ and include/cgdp/ includes only its own layer and those below
it (docs/design.md's table, bottom first), but for the exceptions listed here with their reason.

Usage: tools/check_layers.py [SOURCE_DIR]
Prints one line per include that reaches up (file:line: folder -> folder) and exits 1 if any."""
import pathlib
import re
import sys

# Bottom first; folders on one line are one layer and may include each other.
LAYERS = [
    ["core", "tensor", "device", "io"],
    ["cuda"],
    ["trace"],
    ["data"],
    ["layers", "net", "caffe_import", "proto"],
    ["solver"],
    ["sync"],
    ["cost"],
    ["train"],
    ["measure"],
    ["shard", "launchers"],
    ["cli"],
]
RANK = {folder: rank for rank, folders in enumerate(LAYERS) for folder in folders}

# (including file, included header): why it may reach up.
EXCEPTIONS = {
    ("src/cuda/conv_passes.hpp", "cgdp/layers/layer.hpp"): "CUDA convolution passes run a layer's",
    ("src/cuda/cuda_device.cpp", "cgdp/sync/topology.hpp"): "a GPU's NUMA node, from hwloc",
    ("include/cgdp/caffe_import/solver_file.hpp", "cgdp/train/train_config.hpp"):
        "a solver file becomes the trainer's settings",
    ("include/cgdp/sync/cluster.hpp", "cgdp/shard/ps_client.hpp"): "the shards' client",
    ("include/cgdp/sync/cluster.hpp", "cgdp/shard/shard_server.hpp"): "a host may run a shard",
    ("include/cgdp/sync/host_aggregator.hpp", "cgdp/shard/pulled_chunk.hpp"): "a pulled sum",
    ("src/sync/exchanged_chunks.cpp", "cgdp/shard/shard_layout.hpp"): "chunks cut for the shards",
    ("src/cost/network_stage.cpp", "cgdp/shard/shard_layout.hpp"): "the network stage's bytes",
    ("src/train/trainer.cpp", "cgdp/shard/cluster_token.hpp"): "the client presents the token",
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"(?:cgdp/)?([a-z_]+)/[^"]+"')


def folder_of(root, path):
    parts = path.relative_to(root).parts
    return parts[2] if parts[0] == "include" else parts[1]


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent.parent)
    files = [p for d in ("src", "include/cgdp") for p in (root / d).rglob("*")
             if p.suffix in (".cpp", ".hpp", ".h") and p.parent != root / d]
    if not files:
        sys.exit(f"check_layers: no sources under {root}")
    bad = 0
    for path in sorted(files):
        here = folder_of(root, path)
        if here not in RANK:
            print(f"{path.relative_to(root)}: folder {here} is in no layer (tools/check_layers.py)")
            bad += 1
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            m = INCLUDE.match(line)
            if not m or m.group(1) not in RANK or RANK[m.group(1)] <= RANK[here]:
                continue
            header = line.split('"')[1]
            if (str(path.relative_to(root)), header) in EXCEPTIONS:
                continue
            print(f"{path.relative_to(root)}:{number}: {here} includes {header}, a layer above it")
            bad += 1
    if bad:
        sys.exit(1)
    print(f"check_layers: {len(files)} files, each includes only its layer and those below it")


if __name__ == "__main__":
    main()
