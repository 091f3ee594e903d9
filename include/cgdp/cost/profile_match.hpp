// Checks that a profile was measured on the model at hand: same layers, same parameter sizes.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "cgdp/cost/profile.hpp"
#include "cgdp/sync/chunk_plan.hpp"

namespace cgdp {

// `layer_names` are the train net's layers in forward order, `params` its param layers (as
// param_layers() gives them). Throws DataError naming profile.source and the first mismatch: the
// layer counts, a layer's name, or a param layer's byte count.
void check_profile_matches(const Profile& profile, std::span<const std::string> layer_names,
                           std::span<const ParamLayer> params);

// The same against a built train net.
template <typename T>
void check_profile_matches(const Profile& profile, const Net<T>& net);

}  // namespace cgdp
