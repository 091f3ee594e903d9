#!/usr/bin/python3
"""An independent .caffemodel writer for the weights tests: protobuf's wire format encoded by hand
(no protobuf library, no cgdp code), with Caffe's field numbers, in the current format (`layer`,
BlobProto.shape) or V1's (`layers`, an enum type, num/channels/height/width). Blob values are a
fixed function of the spec's seed; they also go, as raw little-endian float32 in file order, to
OUT.f32, for the test to compare bit for bit.

Usage: write_caffemodel.py SPEC.json OUT.caffemodel
SPEC: {"format": "v2"|"v1", "seed": N, "layers": [{"name", "type", "v1_type", "blobs": [[dims...]]}]}
"""
import json
import struct
import sys


def varint(n):
    out = bytearray()
    n &= (1 << 64) - 1  # negative int64 as two's complement, as protobuf does
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def key(field, wire):
    return varint((field << 3) | wire)


def length_delimited(field, payload):
    return key(field, 2) + varint(len(payload)) + payload


def blob(dims, values, legacy):
    data = length_delimited(5, b"".join(struct.pack("<f", v) for v in values))  # packed floats
    if legacy:  # num/channels/height/width, dims padded with leading 1s to four
        padded = [1] * (4 - len(dims)) + list(dims)
        head = b"".join(key(f, 0) + varint(d) for f, d in zip((1, 2, 3, 4), padded))
        return head + data
    shape = length_delimited(1, b"".join(varint(d) for d in dims))  # BlobShape.dim, packed
    return length_delimited(7, shape) + data


def values_for(seed, layer, index, count):
    # Exactly representable float32 values, different per layer and blob.
    return [float(((seed * 131 + layer * 31 + index * 7 + i) % 2001) - 1000) / 1024.0 for i in range(count)]


def main():
    spec = json.load(open(sys.argv[1]))
    out = sys.argv[2]
    v1 = spec["format"] == "v1"
    net = length_delimited(1, b"spec net")
    raw = bytearray()
    for li, layer in enumerate(spec["layers"]):
        body = bytearray()
        if v1:
            body += length_delimited(4, layer["name"].encode()) + key(5, 0) + varint(layer["v1_type"])
        else:
            body += length_delimited(1, layer["name"].encode()) + length_delimited(2, layer["type"].encode())
        for bi, dims in enumerate(layer["blobs"]):
            count = 1
            for d in dims:
                count *= d
            values = values_for(spec["seed"], li, bi, count)
            raw += b"".join(struct.pack("<f", v) for v in values)
            body += length_delimited(6 if v1 else 7, blob(dims, values, v1))
        net += length_delimited(2 if v1 else 100, bytes(body))
    open(out, "wb").write(net)
    open(out + ".f32", "wb").write(raw)


if __name__ == "__main__":
    main()
