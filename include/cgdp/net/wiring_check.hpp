// Refuses, before anything is built, the wiring Caffe refuses: two layers of one name, and a blob
// written by two producers (in place excepted), which would otherwise drop data silently.
#pragma once

#include <string>

#include "cgdp.pb.h"

namespace cgdp {

// Throws ModelError naming file:line of the second layer and the line of the first.
void check_wiring(const proto::NetParameter& param, const std::string& source);

}  // namespace cgdp
