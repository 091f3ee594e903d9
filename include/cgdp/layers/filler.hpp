// Caffe's parameter fillers: constant, gaussian (sparse too), uniform, xavier, msra, bilinear,
// positive_unitball.
#pragma once

#include "cgdp/layers/layer.hpp"

namespace cgdp {

// Fills `blob`'s data (on any device) as `filler` says; fan-in/out follow Caffe (count/shape[0],
// count/shape[1]). Throws ModelError for an unknown filler type.
template <typename T>
void fill(Blob<T>& blob, const proto::FillerParameter& filler, Rng& rng);

}  // namespace cgdp
