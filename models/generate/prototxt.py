"""Builds Caffe-vocabulary layers (as ordered field lists) and writes them as cgdp prototxt."""

import os
import sys

MODELS_DIR = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


class Enum(str):
    """A protobuf enum value: written bare (MAX, SUM, TEST), not quoted."""


# Caffe's reference learning-rate scheme: weights at the base rate with decay, biases at 2x without.
WEIGHT_PARAM = ("param", [("lr_mult", 1), ("decay_mult", 1)])
BIAS_PARAM = ("param", [("lr_mult", 2), ("decay_mult", 0)])
# Scale after BatchNorm: gamma and beta learn at the base rate, without weight decay.
SCALE_PARAMS = [("param", [("lr_mult", 1), ("decay_mult", 0)])] * 2


def filler(kind, **fields):
    return [("type", kind)] + list(fields.items())


def constant(value):
    return filler("constant", value=value)


def _format_scalar(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Enum):
        return str(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _format_fields(fields, indent):
    lines = []
    pad = "  " * indent
    for key, value in fields:
        if isinstance(value, list):
            lines.append(f"{pad}{key} {{")
            lines.extend(_format_fields(value, indent + 1))
            lines.append(f"{pad}}}")
        else:
            lines.append(f"{pad}{key}: {_format_scalar(value)}")
    return lines


def _layer(name, kind, bottoms, tops, *extra):
    fields = [("name", name), ("type", kind)]
    fields += [("bottom", b) for b in bottoms]
    fields += [("top", t) for t in tops]
    for group in extra:
        fields += group
    return fields


def input_layer(batch, channels, height, width):
    shapes = [("shape", [("dim", d) for d in (batch, channels, height, width)]),
              ("shape", [("dim", batch)])]
    return _layer("data", "Input", [], ["data", "label"], [("input_param", shapes)])


def conv(name, bottom, num_output, kernel, weight_filler, bias_filler=None, stride=1, pad=0,
         group=1, top=None):
    """A convolution; bias_filler None means no bias term (bias_term: false)."""
    conv_fields = [("num_output", num_output)]
    if bias_filler is None:
        conv_fields.append(("bias_term", False))
    if pad:
        conv_fields.append(("pad", pad))
    conv_fields.append(("kernel_size", kernel))
    if stride != 1:
        conv_fields.append(("stride", stride))
    if group != 1:
        conv_fields.append(("group", group))
    conv_fields.append(("weight_filler", weight_filler))
    params = [WEIGHT_PARAM]
    if bias_filler is not None:
        conv_fields.append(("bias_filler", bias_filler))
        params.append(BIAS_PARAM)
    return _layer(name, "Convolution", [bottom], [top or name], params,
                  [("convolution_param", conv_fields)])


def inner_product(name, bottom, num_output, weight_filler, bias_filler, top=None):
    ip_fields = [("num_output", num_output), ("weight_filler", weight_filler),
                 ("bias_filler", bias_filler)]
    return _layer(name, "InnerProduct", [bottom], [top or name], [WEIGHT_PARAM, BIAS_PARAM],
                  [("inner_product_param", ip_fields)])


def pool(name, bottom, method, kernel=None, stride=1, pad=0, global_pooling=False, top=None):
    pool_fields = [("pool", Enum(method))]
    if global_pooling:
        pool_fields.append(("global_pooling", True))
    else:
        pool_fields.append(("kernel_size", kernel))
        if stride != 1:
            pool_fields.append(("stride", stride))
        if pad:
            pool_fields.append(("pad", pad))
    return _layer(name, "Pooling", [bottom], [top or name], [("pooling_param", pool_fields)])


def relu(name, blob):
    return _layer(name, "ReLU", [blob], [blob])


def dropout(name, blob, ratio):
    return _layer(name, "Dropout", [blob], [blob], [("dropout_param", [("dropout_ratio", ratio)])])


def lrn(name, bottom, local_size=5, alpha=0.0001, beta=0.75, top=None):
    lrn_fields = [("local_size", local_size), ("alpha", alpha), ("beta", beta)]
    return _layer(name, "LRN", [bottom], [top or name], [("lrn_param", lrn_fields)])


def batch_norm(name, blob):
    """In place; its three blobs are running statistics, which Caffe never updates by gradient."""
    return _layer(name, "BatchNorm", [blob], [blob])


def scale(name, blob):
    scale_fields = [("bias_term", True), ("filler", constant(1)), ("bias_filler", constant(0))]
    return _layer(name, "Scale", [blob], [blob], SCALE_PARAMS, [("scale_param", scale_fields)])


def eltwise_sum(name, bottoms, top=None):
    return _layer(name, "Eltwise", bottoms, [top or name],
                  [("eltwise_param", [("operation", Enum("SUM"))])])


def concat(name, bottoms, top=None):
    return _layer(name, "Concat", bottoms, [top or name])


def accuracy_and_loss(scores):
    """Top-1 accuracy (TEST phase only) and the softmax loss, on the label top of the input."""
    accuracy = _layer("accuracy", "Accuracy", [scores, "label"], ["accuracy"],
                      [("include", [("phase", Enum("TEST"))])])
    loss = _layer("loss", "SoftmaxWithLoss", [scores, "label"], ["loss"])
    return [accuracy, loss]


def write_net(filename, comment, net_name, layers):
    """Writes models/<filename>; the comment becomes its first line."""
    script = os.path.basename(sys.argv[0])
    lines = [f"# {comment}", f"# Generated by models/generate/{script}; edit that, not this file.",
             f'name: "{net_name}"']
    for layer in layers:
        lines.append("layer {")
        lines.extend(_format_fields(layer, 1))
        lines.append("}")
    path = os.path.join(MODELS_DIR, filename)
    with open(path, "w", encoding="utf-8") as out:
        out.write("\n".join(lines) + "\n")
    print(f"wrote {path} ({len(layers)} layers)")

