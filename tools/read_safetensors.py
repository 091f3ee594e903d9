#!/usr/bin/env python3
"""Prints each tensor of a safetensors file: name, dtype, shape, sum (tab-separated). Stdlib only."""
import json, math, struct, sys

FORMATS = {"F64": "d", "F32": "f", "F16": "e", "I64": "q", "I32": "i", "I16": "h", "I8": "b",
           "U8": "B", "BOOL": "?"}

def read(path):
    with open(path, "rb") as f:
        blob = f.read()
    (length,) = struct.unpack("<Q", blob[:8])
    header, data = json.loads(blob[8:8 + length]), blob[8 + length:]
    for key, value in sorted(header.pop("__metadata__", {}).items()):
        print(f"metadata\t{key}\t{value}")
    sums = {}
    for name, info in sorted(header.items()):
        code, (begin, end) = FORMATS[info["dtype"]], info["data_offsets"]
        values = struct.unpack(f"<{(end - begin) // struct.calcsize(code)}{code}", data[begin:end])
        sums[name] = math.fsum(values)
        print(f"{name}\t{info['dtype']}\t{json.dumps(info['shape'])}\t{sums[name]!r}")
    return sums

if __name__ == "__main__":
    sums = read(sys.argv[1])
    try:  # the reference reader, where installed, must agree
        from safetensors.numpy import load_file
    except ImportError:
        sys.exit(0)
    for name, array in load_file(sys.argv[1]).items():
        assert math.isclose(float(array.astype("float64").sum()), sums[name], rel_tol=1e-9), name
    print("safetensors package agrees")
