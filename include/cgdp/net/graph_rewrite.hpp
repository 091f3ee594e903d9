// Rewrites of a model before it is built: keep one phase's layers, insert Split layers for fan-out.
#pragma once

#include "cgdp.pb.h"
#include "cgdp/layers/layer.hpp"

namespace cgdp {

// Whether `layer`'s include/exclude rules admit a net of `phase` whose level and stages `state`
// gives (Caffe's StateMeetsRule and FilterNet; state's own phase is not read).
bool layer_in_phase(const proto::LayerParameter& layer, Phase phase, const proto::NetState& state);

// Caffe's solver train_state and test_state: the model's own `state` merged with `train`, or with
// `test` (stages added, a level set), decides now which layers each phase's net keeps; every rule
// becomes a plain phase rule (none: both phases; include { phase }: one) and a layer of neither
// phase goes. From then on nets and data layers are filtered by phase alone.
proto::NetParameter resolve_states(const proto::NetParameter& model, const proto::NetState& train,
                                   const proto::NetState& test);
// The model's `state` merged with `extra`, as a phase's net sees it.
proto::NetState merged_state(const proto::NetParameter& model, const proto::NetState& extra);

// Keeps the layers admitted in `phase`, with the level and stages of the model's `state`.
proto::NetParameter filter_phase(const proto::NetParameter& param, Phase phase);

// A deploy net (one Input with one top, no loss or accuracy) scored on labelled data, as
// `cgdp test` does: its Input gains a `label` top, and a SoftmaxWithLoss and an Accuracy read
// the net's one output (the logits before a final Softmax, if it has one). Returns a line on
// what was added, or "" when the net already reads labels (or has no Input); ModelError naming
// `source` when it has several outputs.
std::string add_scoring_layers(proto::NetParameter& model, const std::string& source);

// --gemm-conv: every Convolution on the im2col + GEMM engine (engine: CAFFE).
void use_gemm_convolutions(proto::NetParameter& model);

// Gives every blob read by more than one layer a Split layer, so each consumer gets its own
// diff and the Split sums them in backward. Throws ModelError for a bottom no layer produces.
proto::NetParameter insert_splits(const proto::NetParameter& param, const std::string& source);

}  // namespace cgdp
