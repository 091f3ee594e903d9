// What `cgdp export` and `cgdp forward` share: a model file (its data layers read for their
// input's shape) and the trained weights it is filled with.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "cgdp.pb.h"
#include "cgdp/caffe_import/weights.hpp"

namespace cgdp::cli {

struct TrainedNetFlags {
  std::string model = "fashion_cnn";
  std::string data;  // for a model with data layers: a source of its input's shape
  std::vector<std::string> weights;
  std::string weights_map;
};

// --model, --weights FILE[,FILE...], --weights-map and --data.
void add_trained_net_flags(CLI::App* cmd, TrainedNetFlags& f);

// The model file's net, its data layers made Inputs of their data's shape.
proto::NetParameter load_trained_model(const TrainedNetFlags& f, std::string& path);

// Copies the weights into `net` by layer name. A layer they leave at its filler is a UsageError
// saying that `outcome` would come from random values.
WeightsReport fill_with_weights(Net<float>& net, const TrainedNetFlags& f, const std::string& path,
                                const std::string& outcome);

}  // namespace cgdp::cli
