"""Generates ResNet-152 (Kaiming He's Caffe layout and names) and the small test ResNet."""

from prototxt import (accuracy_and_loss, batch_norm, constant, conv, eltwise_sum, filler,
                      inner_product, input_layer, pool, relu, scale, write_net)

MSRA = filler("msra")


def conv_bn(suffix, bottom, num_output, kernel, stride=1, pad=0, with_relu=True):
    """res<suffix> (no bias) + bn<suffix> + scale<suffix> [+ res<suffix>_relu], in place after conv."""
    name = "res" + suffix
    layers = [conv(name, bottom, num_output, kernel, MSRA, stride=stride, pad=pad),
              batch_norm("bn" + suffix, name), scale("scale" + suffix, name)]
    if with_relu:
        layers.append(relu(name + "_relu", name))
    return layers, name


def residual_sum(block, shortcut, branch):
    name = "res" + block
    return [eltwise_sum(name, [shortcut, branch]), relu(name + "_relu", name)], name


def bottleneck(block, bottom, width, stride, project):
    """1x1 (stride here, as in He's Caffe models) -> 3x3 -> 1x1 x4, plus shortcut."""
    layers, shortcut = [], bottom
    if project:
        layers, shortcut = conv_bn(block + "_branch1", bottom, 4 * width, 1, stride,
                                   with_relu=False)
    a, top = conv_bn(block + "_branch2a", bottom, width, 1, stride)
    b, top = conv_bn(block + "_branch2b", top, width, 3, pad=1)
    c, top = conv_bn(block + "_branch2c", top, 4 * width, 1, with_relu=False)
    tail, out = residual_sum(block, shortcut, top)
    return layers + a + b + c + tail, out


def basic_block(block, bottom, width, stride, project):
    """3x3 (stride) -> 3x3, plus shortcut."""
    layers, shortcut = [], bottom
    if project:
        layers, shortcut = conv_bn(block + "_branch1", bottom, width, 1, stride, with_relu=False)
    a, top = conv_bn(block + "_branch2a", bottom, width, 3, stride, pad=1)
    b, top = conv_bn(block + "_branch2b", top, width, 3, pad=1, with_relu=False)
    tail, out = residual_sum(block, shortcut, top)
    return layers + a + b + tail, out


def block_names(stage, depth):
    # He's names: res2a, res2b, res2c for short stages; res3a, res3b1..res3b7 for long ones.
    if depth <= 3:
        return [f"{stage}{letter}" for letter in "abc"[:depth]]
    return [f"{stage}a"] + [f"{stage}b{i}" for i in range(1, depth)]


def stem(num_output, kernel, stride, pad):
    """conv1 (no bias) + bn_conv1 + scale_conv1 + conv1_relu, all in place on conv1."""
    return [conv("conv1", "data", num_output, kernel, MSRA, stride=stride, pad=pad),
            batch_norm("bn_conv1", "conv1"), scale("scale_conv1", "conv1"),
            relu("conv1_relu", "conv1")]


def head(bottom, classes):
    return [pool("pool5", bottom, "AVE", global_pooling=True),
            inner_product(f"fc{classes}", "pool5", classes, filler("xavier"), constant(0)),
            *accuracy_and_loss(f"fc{classes}")]


def resnet152():
    layers = [input_layer(32, 3, 224, 224)]
    layers += stem(64, 7, stride=2, pad=3) + [pool("pool1", "conv1", "MAX", 3, stride=2)]
    bottom = "pool1"
    for stage, (width, depth) in enumerate([(64, 3), (128, 8), (256, 36), (512, 3)], 2):
        for index, block in enumerate(block_names(stage, depth)):
            stride = 2 if index == 0 and stage > 2 else 1
            block_layers, bottom = bottleneck(block, bottom, width, stride, project=index == 0)
            layers += block_layers
    layers += head(bottom, 1000)
    write_net("resnet152.prototxt",
              "ResNet-152 (He et al.) with BatchNorm + Scale, 3x224x224, 1000 classes.",
              "ResNet-152", layers)


def resnet_small():
    """For tests: a 3x3 stem and two basic blocks (the second halves the size), 16 -> 32 wide."""
    layers = [input_layer(16, 1, 28, 28)]
    layers += stem(16, 3, stride=1, pad=1)
    block_layers, bottom = basic_block("2a", "conv1", 16, 1, project=False)
    layers += block_layers
    block_layers, bottom = basic_block("3a", bottom, 32, 2, project=True)
    layers += block_layers
    layers += head(bottom, 10)
    write_net("resnet_small.prototxt",
              "Small residual net with BatchNorm for tests, 1x28x28 (Fashion-MNIST), 10 classes.",
              "ResNetSmall", layers)


if __name__ == "__main__":
    resnet152()
    resnet_small()
