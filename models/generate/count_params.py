"""Checks model files: infers each layer's output shape with Caffe's rules and counts parameters.

Usage: count_params.py [--quiet] [--expect FILE=TOTAL ...] FILE.prototxt ...
Prints per-layer top shapes and learnable parameter counts, then the total per file. Learnable
means convolution/inner-product weights and biases and Scale's gamma/beta; BatchNorm's running
statistics are listed separately and not counted. When protoc is on PATH, each file is also
parsed against src/proto/cgdp.proto, so a field cgdp does not know is reported.
Exits non-zero on any parse, shape or expectation failure.
"""

import math
import os
import re
import shutil
import subprocess
import sys

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
PROTO = os.path.join(REPO, "src", "proto", "cgdp.proto")

TOKEN = re.compile(r'\s+|#[^\n]*|"(?:[^"\\]|\\.)*"|[{}:]|[^\s{}:"#]+')


class ModelError(Exception):
    pass


# ---- a minimal protobuf text-format reader: every field becomes a list of values ----

def tokenize(text):
    tokens = []
    for match in TOKEN.finditer(text):
        token = match.group(0)
        if token[0].isspace() or token[0] == "#":
            continue
        tokens.append(token)
    return tokens


def parse_message(tokens, pos, closing):
    message = {}
    while pos < len(tokens) and tokens[pos] != "}":
        key = tokens[pos]
        pos += 1
        if tokens[pos] == ":":
            pos += 1
        if tokens[pos] == "{":
            value, pos = parse_message(tokens, pos + 1, True)
        else:
            value, pos = scalar(tokens[pos]), pos + 1
        message.setdefault(key, []).append(value)
    if closing:
        if pos >= len(tokens):
            raise ModelError("unbalanced braces")
        pos += 1
    elif pos < len(tokens):
        raise ModelError("unexpected '}'")
    return message, pos


def scalar(token):
    if token.startswith('"'):
        return bytes(token[1:-1], "utf-8").decode("unicode_escape")
    if token in ("true", "false"):
        return token == "true"
    for kind in (int, float):
        try:
            return kind(token)
        except ValueError:
            pass
    return token  # an enum name


def get(message, key, default=None):
    values = message.get(key)
    return values[0] if values else default


def sub(message, key):
    return get(message, key, {})


# ---- Caffe's shape rules ----

def spatial(values, h_value, w_value, default):
    """Caffe's (kernel|pad|stride) or (kernel|pad|stride)_h/_w; a repeated field may list both."""
    if h_value is not None or w_value is not None:
        return h_value, w_value
    if not values:
        return default, default
    return values[0], values[-1]


def conv_output(layer, shape):
    p = sub(layer, "convolution_param")
    n, c, h, w = shape
    kh, kw = spatial(p.get("kernel_size"), get(p, "kernel_h"), get(p, "kernel_w"), None)
    ph, pw = spatial(p.get("pad"), get(p, "pad_h"), get(p, "pad_w"), 0)
    sh, sw = spatial(p.get("stride"), get(p, "stride_h"), get(p, "stride_w"), 1)
    dh, dw = spatial(p.get("dilation"), None, None, 1)
    out, group = get(p, "num_output"), get(p, "group", 1)
    if kh is None or out is None:
        raise ModelError("convolution needs num_output and kernel_size")
    if c % group or out % group:
        raise ModelError(f"group {group} does not divide channels {c} and outputs {out}")
    oh = (h + 2 * ph - (dh * (kh - 1) + 1)) // sh + 1
    ow = (w + 2 * pw - (dw * (kw - 1) + 1)) // sw + 1
    weights = out * (c // group) * kh * kw
    bias = out if get(p, "bias_term", True) else 0
    return [n, out, oh, ow], weights + bias


def pool_extent(size, kernel, pad, stride):
    # Caffe rounds up, then drops a last window that would start inside the padding only.
    out = int(math.ceil((size + 2 * pad - kernel) / stride)) + 1
    if pad and (out - 1) * stride >= size + pad:
        out -= 1
    return out


def pool_output(layer, shape):
    p = sub(layer, "pooling_param")
    n, c, h, w = shape
    if get(p, "global_pooling", False):
        return [n, c, 1, 1], 0
    k = get(p, "kernel_size")
    kh, kw = (get(p, "kernel_h"), get(p, "kernel_w")) if k is None else (k, k)
    ph, pw = get(p, "pad_h", get(p, "pad", 0)), get(p, "pad_w", get(p, "pad", 0))
    s = get(p, "stride", 1)
    sh, sw = get(p, "stride_h", s), get(p, "stride_w", s)
    return [n, c, pool_extent(h, kh, ph, sh), pool_extent(w, kw, pw, sw)], 0


def inner_product_output(layer, shape):
    p = sub(layer, "inner_product_param")
    axis = get(p, "axis", 1)
    inputs = math.prod(shape[axis:])
    out = get(p, "num_output")
    bias = out if get(p, "bias_term", True) else 0
    return shape[:axis] + [out], out * inputs + bias


def concat_output(layer, shapes):
    axis = get(sub(layer, "concat_param"), "axis", 1)
    for s in shapes[1:]:
        if s[:axis] + s[axis + 1:] != shapes[0][:axis] + shapes[0][axis + 1:]:
            raise ModelError(f"concat inputs disagree outside axis {axis}: {shapes}")
    out = list(shapes[0])
    out[axis] = sum(s[axis] for s in shapes)
    return out


def layer_output(layer, kind, shapes):
    """Returns (top shapes, learnable count, non-learnable count)."""
    if kind == "Input":
        return [list(s["dim"]) for s in sub(layer, "input_param").get("shape", [])], 0, 0
    if kind == "Convolution":
        shape, params = conv_output(layer, shapes[0])
        return [shape], params, 0
    if kind == "Pooling":
        return [pool_output(layer, shapes[0])[0]], 0, 0
    if kind == "InnerProduct":
        shape, params = inner_product_output(layer, shapes[0])
        return [shape], params, 0
    if kind in ("ReLU", "Dropout", "LRN"):
        return [shapes[0]], 0, 0
    if kind == "BatchNorm":  # mean, variance, moving-average factor
        return [shapes[0]], 0, 2 * shapes[0][1] + 1
    if kind == "Scale":
        channels = shapes[0][1]
        bias = channels if get(sub(layer, "scale_param"), "bias_term", False) else 0
        return [shapes[0]], channels + bias, 0
    if kind == "Eltwise":
        if any(s != shapes[0] for s in shapes):
            raise ModelError(f"eltwise inputs differ: {shapes}")
        return [shapes[0]], 0, 0
    if kind == "Concat":
        return [concat_output(layer, shapes)], 0, 0
    if kind in ("SoftmaxWithLoss", "Accuracy"):
        if shapes[1] != [shapes[0][0]]:
            raise ModelError(f"label shape {shapes[1]} does not match scores {shapes[0]}")
        return [[]], 0, 0
    raise ModelError(f"unknown layer type '{kind}'")


def check_net(net, quiet):
    blobs, total, frozen = {}, 0, 0
    for layer in net.get("layer", []):
        name, kind = get(layer, "name"), get(layer, "type")
        try:
            missing = [b for b in layer.get("bottom", []) if b not in blobs]
            if missing:
                raise ModelError(f"bottom(s) {missing} not produced by an earlier layer")
            bottoms = [blobs[b] for b in layer.get("bottom", [])]
            tops, params, stats = layer_output(layer, kind, bottoms)
        except ModelError as error:
            raise ModelError(f"layer '{name}' ({kind}): {error}") from None
        for top, shape in zip(layer.get("top", []), tops):
            blobs[top] = shape
        total += params
        frozen += stats
        if not quiet:
            shown = " ".join("x".join(map(str, s)) or "scalar" for s in tops)
            print(f"  {name:36s} {kind:16s} {shown:22s} {params:>12,d}")
    return total, frozen


def protoc_check(path):
    protoc = shutil.which("protoc")
    if protoc is None:
        return "protoc not found; schema not checked"
    with open(path, "rb") as text:
        result = subprocess.run(
            [protoc, f"--proto_path={os.path.dirname(PROTO)}", "--encode=cgdp.proto.NetParameter",
             os.path.basename(PROTO)], stdin=text, capture_output=True)
    if result.returncode != 0:
        raise ModelError("does not parse as cgdp.proto.NetParameter: " +
                         result.stderr.decode(errors="replace").strip())
    return "parses against cgdp.proto"


def main(argv):
    quiet = "--quiet" in argv
    expect, files, args = {}, [], [a for a in argv if a != "--quiet"]
    while args:
        arg = args.pop(0)
        if arg == "--expect":
            name, value = args.pop(0).split("=")
            expect[name] = int(value.replace(",", "").replace("_", ""))
        else:
            files.append(arg)
    failed = False
    for path in files:
        print(f"{path}:")
        try:
            schema = protoc_check(path)
            with open(path, encoding="utf-8") as text:
                net, _ = parse_message(tokenize(text.read()), 0, False)
            total, frozen = check_net(net, quiet)
        except (ModelError, OSError) as error:
            print(f"  ERROR: {error}")
            failed = True
            continue
        print(f"  total learnable parameters: {total:,d} "
              f"(+ {frozen:,d} BatchNorm statistics, not learnable); {schema}")
        wanted = expect.get(os.path.basename(path), expect.get(path))
        if wanted is not None and wanted != total:
            print(f"  MISMATCH: expected {wanted:,d}")
            failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
