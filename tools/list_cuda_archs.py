#!/usr/bin/python3
"""Lists the GPU code a binary carries, as `cuobjdump --list-elf` / `--list-ptx` would (the toolkit
here ships no cuobjdump): the entries of every fatbinary container in its .nv_fatbin section.

Usage: tools/list_cuda_archs.py BINARY [--require 80,90]
Prints one line per distinct entry ("elf sm_90", "ptx compute_90"). With --require, exits 1 unless
the binary holds machine code (elf) for each of those architectures.
Container layout (from nvcc's fatbinary): a 16-byte header (magic 0xBA55ED50, version, header
size, size of the entries), then entries, each a header (kind 1 = PTX, 2 = ELF; its own size;
padded payload size; architecture at byte 28) followed by its payload."""
import argparse
import struct
import sys

MAGIC = 0xBA55ED50


def fatbin_section(path):
    with open(path, "rb") as f:
        elf = f.read()
    if elf[:4] != b"\x7fELF" or elf[4] != 2:
        sys.exit(f"{path}: not a 64-bit ELF file")
    shoff, = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3A)
    sections = [struct.unpack_from("<IIQQQQ", elf, shoff + i * shentsize) for i in range(shnum)]
    names_at = sections[shstrndx][4]
    for name, _type, _flags, _addr, offset, size in sections:
        end = elf.index(b"\0", names_at + name)
        if elf[names_at + name:end] == b".nv_fatbin":
            return elf[offset:offset + size]
    sys.exit(f"{path}: no .nv_fatbin section: no GPU code in this binary")


def entries(blob):
    at = 0
    while at + 16 <= len(blob):
        magic, _version, header_size, size = struct.unpack_from("<IHHQ", blob, at)
        if magic != MAGIC:  # containers are aligned; skip padding
            at += 8
            continue
        entry, end = at + header_size, at + header_size + size
        while entry + 32 <= end:
            kind, _v, entry_header, padded = struct.unpack_from("<HHII", blob, entry)
            arch, = struct.unpack_from("<I", blob, entry + 28)
            yield ("ptx" if kind == 1 else "elf" if kind == 2 else f"kind{kind}"), arch
            entry += entry_header + padded
        at = end


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("binary")
    parser.add_argument("--require", default="")
    args = parser.parse_args()
    found = sorted(set(entries(fatbin_section(args.binary))))
    for kind, arch in found:
        print(f"{kind} {'sm' if kind == 'elf' else 'compute'}_{arch}")
    wanted = [int(a) for a in args.require.split(",") if a]
    missing = [a for a in wanted if ("elf", a) not in found]
    if missing:
        sys.exit(f"{args.binary}: no machine code for " + ", ".join(f"sm_{a}" for a in missing) +
                 " (set CMAKE_CUDA_ARCHITECTURES)")


if __name__ == "__main__":
    main()
