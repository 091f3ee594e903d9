"""Generates the plain convolutional nets: fashion_cnn (default), BVLC AlexNet and VGG-16."""

from prototxt import (accuracy_and_loss, constant, conv, dropout, filler, inner_product,
                      input_layer, lrn, pool, relu, write_net)


def fashion_cnn():
    xavier = filler("xavier")
    layers = [input_layer(64, 1, 28, 28)]
    layers += [conv("conv1", "data", 32, 5, xavier, constant(0), pad=2), relu("relu1", "conv1"),
               pool("pool1", "conv1", "MAX", 2, stride=2)]
    layers += [conv("conv2", "pool1", 64, 5, xavier, constant(0), pad=2), relu("relu2", "conv2"),
               pool("pool2", "conv2", "MAX", 2, stride=2)]
    layers += [inner_product("ip1", "pool2", 256, xavier, constant(0)), relu("relu3", "ip1"),
               dropout("drop1", "ip1", 0.5)]
    layers += [inner_product("ip2", "ip1", 10, xavier, constant(0))]
    layers += accuracy_and_loss("ip2")
    write_net("fashion_cnn.prototxt",
              "Default model: a two-conv CNN for Fashion-MNIST (1x28x28, 10 classes).",
              "FashionCNN", layers)


def alexnet():
    """BVLC's bvlc_alexnet train_val: LRN before pooling, two groups in conv2/4/5."""
    g01, g005 = filler("gaussian", std=0.01), filler("gaussian", std=0.005)
    layers = [input_layer(256, 3, 227, 227)]
    layers += [conv("conv1", "data", 96, 11, g01, constant(0), stride=4), relu("relu1", "conv1"),
               lrn("norm1", "conv1"), pool("pool1", "norm1", "MAX", 3, stride=2)]
    layers += [conv("conv2", "pool1", 256, 5, g01, constant(0.1), pad=2, group=2),
               relu("relu2", "conv2"), lrn("norm2", "conv2"),
               pool("pool2", "norm2", "MAX", 3, stride=2)]
    layers += [conv("conv3", "pool2", 384, 3, g01, constant(0), pad=1), relu("relu3", "conv3")]
    layers += [conv("conv4", "conv3", 384, 3, g01, constant(0.1), pad=1, group=2),
               relu("relu4", "conv4")]
    layers += [conv("conv5", "conv4", 256, 3, g01, constant(0.1), pad=1, group=2),
               relu("relu5", "conv5"), pool("pool5", "conv5", "MAX", 3, stride=2)]
    layers += [inner_product("fc6", "pool5", 4096, g005, constant(0.1)), relu("relu6", "fc6"),
               dropout("drop6", "fc6", 0.5)]
    layers += [inner_product("fc7", "fc6", 4096, g005, constant(0.1)), relu("relu7", "fc7"),
               dropout("drop7", "fc7", 0.5)]
    layers += [inner_product("fc8", "fc7", 1000, g01, constant(0))]
    layers += accuracy_and_loss("fc8")
    write_net("alexnet.prototxt", "BVLC AlexNet (bvlc_alexnet) for ImageNet, 3x227x227, 1000 classes.",
              "AlexNet", layers)


def vgg16():
    """VGG-16 (configuration D); xavier weights so that it can also start from scratch."""
    xavier = filler("xavier")
    layers = [input_layer(32, 3, 224, 224)]
    bottom = "data"
    for stage, (width, depth) in enumerate([(64, 2), (128, 2), (256, 3), (512, 3), (512, 3)], 1):
        for index in range(1, depth + 1):
            name = f"conv{stage}_{index}"
            layers += [conv(name, bottom, width, 3, xavier, constant(0), pad=1),
                       relu(f"relu{stage}_{index}", name)]
            bottom = name
        layers.append(pool(f"pool{stage}", bottom, "MAX", 2, stride=2))
        bottom = f"pool{stage}"
    for name, width in [("fc6", 4096), ("fc7", 4096)]:
        layers += [inner_product(name, bottom, width, filler("gaussian", std=0.005), constant(0.1)),
                   relu(f"relu{name[2:]}", name), dropout(f"drop{name[2:]}", name, 0.5)]
        bottom = name
    layers.append(inner_product("fc8", bottom, 1000, filler("gaussian", std=0.01), constant(0)))
    layers += accuracy_and_loss("fc8")
    write_net("vgg16.prototxt", "VGG-16 (model D) for ImageNet, 3x224x224, 1000 classes.", "VGG16",
              layers)


if __name__ == "__main__":
    fashion_cnn()
    alexnet()
    vgg16()
