// What cgdp does with each part of Caffe's vocabulary: the layer types it builds, and for each
// message the fields it honours. Everything else a file sets is a problem that says so, with the
// line and what to use instead: nothing is dropped silently.
#pragma once

#include <string>
#include <vector>

#include "cgdp.pb.h"
#include "cgdp/caffe_import/problems.hpp"
#include "cgdp/caffe_import/text_reader.hpp"

namespace cgdp {

// Checks an upgraded net. `net_locations` is where the file's own fields were read, and
// `layer_locations[i]` where layer i's were (null for a layer made by an upgrade, whose problems
// name the layer's line).
void check_net_vocabulary(const proto::NetParameter& net, const TextLocations* net_locations,
                          const std::vector<const TextLocations*>& layer_locations,
                          FileProblems& problems);

// Checks a solver file's fields (nets given inline are checked as nets by the solver reader).
void check_solver_vocabulary(const proto::SolverParameter& solver, const TextLocations* locations,
                             FileProblems& problems);

}  // namespace cgdp
