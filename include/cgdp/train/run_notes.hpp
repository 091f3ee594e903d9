// What a run says about itself in its start lines and errors: which kernels multiply in 16 bits,
// which activations stay in oneDNN's layouts, a loss scale as a number, where a non-finite output
// came from.
#pragma once

#include <optional>
#include <string>

#include "cgdp/net/net.hpp"

namespace cgdp {

// "cgdp: precision bf16: ...", or "" in fp32.
std::string precision_note(Net<float>& net);
// "cgdp: layout: ...", or "" when every activation is NCHW. Names the first few (ResNet-152 keeps
// hundreds).
std::string layout_note(const Net<float>& net);
// A loss scale as a number: whole ones in full (1048576, not 1.04858e+06).
std::string loss_scale_text(double scale);
// "first non-finite output in layer 'x'" (plus `suffix`), or none when every layer output is
// finite.
std::optional<std::string> non_finite_output(Net<float>& net, const std::string& suffix = "");

}  // namespace cgdp
