// Caffe's upgrades of older model files, applied on load so that the rest of cgdp sees one format
// (what Caffe's upgrade_proto.cpp does when it reads them).
#pragma once

#include <string>

#include "cgdp.pb.h"
#include "cgdp/caffe_import/problems.hpp"

namespace cgdp {

// V1 `layers { type: CONVOLUTION ... }` become `layer { type: "Convolution" ... }`, appended to
// `layer`; blobs_lr, weight_decay and the parameter names become `param { lr_mult decay_mult
// name }`. A file with both formats, a V0 layer or a type of NONE is a problem.
void upgrade_v1_layers(proto::NetParameter& net, FileProblems& problems);

// The deploy header (`input:` with `input_shape` or four `input_dim` each) becomes an Input layer
// named "input" in front of the others.
void upgrade_input_header(proto::NetParameter& net, FileProblems& problems);

// Fields Caffe moved: data_param's (and image_data_param's, window_data_param's) scale,
// mean_file, crop_size and mirror go to transform_param; concat_dim and slice_dim become axis;
// BatchNorm's `param` entries (its statistics, never learned) are dropped.
void upgrade_moved_fields(proto::NetParameter& net, FileProblems& problems);

// "Convolution" for CONVOLUTION, as Caffe names V1's types.
std::string v1_type_name(proto::V1LayerParameter::LayerType type);

}  // namespace cgdp
