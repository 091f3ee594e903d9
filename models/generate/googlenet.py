"""Generates BVLC GoogLeNet v1 (bvlc_googlenet) without its two auxiliary classifier heads."""

from prototxt import (accuracy_and_loss, concat, constant, conv, dropout, filler, inner_product,
                      input_layer, lrn, pool, relu, write_net)

# Inception modules as in the paper's table 1: #1x1, #3x3 reduce, #3x3, #5x5 reduce, #5x5, pool proj.
INCEPTION = {
    "3a": (64, 96, 128, 16, 32, 32),
    "3b": (128, 128, 192, 32, 96, 64),
    "4a": (192, 96, 208, 16, 48, 64),
    "4b": (160, 112, 224, 24, 64, 64),
    "4c": (128, 128, 256, 24, 64, 64),
    "4d": (112, 144, 288, 32, 64, 64),
    "4e": (256, 160, 320, 32, 128, 128),
    "5a": (256, 160, 320, 32, 128, 128),
    "5b": (384, 192, 384, 48, 128, 128),
}


def xavier(std):
    # BVLC writes a std into its xavier fillers; Caffe's xavier ignores it. Kept for fidelity.
    return filler("xavier", std=std)


def conv_relu(name, relu_name, bottom, num_output, kernel, std, stride=1, pad=0):
    return [conv(name, bottom, num_output, kernel, xavier(std), constant(0.2), stride=stride,
                 pad=pad), relu(relu_name, name)]


def inception(module, bottom):
    n1, n3r, n3, n5r, n5, proj = INCEPTION[module]
    p = f"inception_{module}/"
    layers = conv_relu(p + "1x1", p + "relu_1x1", bottom, n1, 1, 0.03)
    layers += conv_relu(p + "3x3_reduce", p + "relu_3x3_reduce", bottom, n3r, 1, 0.09)
    layers += conv_relu(p + "3x3", p + "relu_3x3", p + "3x3_reduce", n3, 3, 0.03, pad=1)
    layers += conv_relu(p + "5x5_reduce", p + "relu_5x5_reduce", bottom, n5r, 1, 0.2)
    layers += conv_relu(p + "5x5", p + "relu_5x5", p + "5x5_reduce", n5, 5, 0.03, pad=2)
    layers.append(pool(p + "pool", bottom, "MAX", 3, stride=1, pad=1))
    layers += conv_relu(p + "pool_proj", p + "relu_pool_proj", p + "pool", proj, 1, 0.1)
    layers.append(concat(p + "output", [p + "1x1", p + "3x3", p + "5x5", p + "pool_proj"]))
    return layers, p + "output"


def googlenet():
    layers = [input_layer(64, 3, 224, 224)]
    layers += conv_relu("conv1/7x7_s2", "conv1/relu_7x7", "data", 64, 7, 0.1, stride=2, pad=3)
    layers += [pool("pool1/3x3_s2", "conv1/7x7_s2", "MAX", 3, stride=2),
               lrn("pool1/norm1", "pool1/3x3_s2")]
    layers += conv_relu("conv2/3x3_reduce", "conv2/relu_3x3_reduce", "pool1/norm1", 64, 1, 0.1)
    layers += conv_relu("conv2/3x3", "conv2/relu_3x3", "conv2/3x3_reduce", 192, 3, 0.03, pad=1)
    layers += [lrn("conv2/norm2", "conv2/3x3"),
               pool("pool2/3x3_s2", "conv2/norm2", "MAX", 3, stride=2)]
    bottom = "pool2/3x3_s2"
    for module in INCEPTION:
        module_layers, bottom = inception(module, bottom)
        layers += module_layers
        if module in ("3b", "4e"):  # the two stride-2 poolings between stages
            stage = int(module[0])
            layers.append(pool(f"pool{stage}/3x3_s2", bottom, "MAX", 3, stride=2))
            bottom = f"pool{stage}/3x3_s2"
    layers += [pool("pool5/7x7_s1", bottom, "AVE", 7, stride=1),
               dropout("pool5/drop_7x7_s1", "pool5/7x7_s1", 0.4)]
    layers.append(inner_product("loss3/classifier", "pool5/7x7_s1", 1000, filler("xavier"),
                                constant(0)))
    layers += accuracy_and_loss("loss3/classifier")
    write_net("googlenet.prototxt",
              "BVLC GoogLeNet v1 without the auxiliary heads, 3x224x224, 1000 classes.",
              "GoogleNet", layers)


if __name__ == "__main__":
    googlenet()
