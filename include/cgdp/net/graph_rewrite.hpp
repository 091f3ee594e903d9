// Rewrites of a model before it is built: keep one phase's layers, insert Split layers for fan-out.
#pragma once

#include "cgdp.pb.h"
#include "cgdp/layers/layer.hpp"

namespace cgdp {

// Whether `layer`'s include/exclude rules admit a net of `phase` whose level and stages `state`
// gives (Caffe's StateMeetsRule and FilterNet; state's own phase is not read).
bool layer_in_phase(const proto::LayerParameter& layer, Phase phase, const proto::NetState& state);

// Keeps the layers admitted in `phase`, with the level and stages of the model's `state`.
proto::NetParameter filter_phase(const proto::NetParameter& param, Phase phase);

// Gives every blob read by more than one layer a Split layer, so each consumer gets its own
// diff and the Split sums them in backward. Throws ModelError for a bottom no layer produces.
proto::NetParameter insert_splits(const proto::NetParameter& param, const std::string& source);

}  // namespace cgdp
