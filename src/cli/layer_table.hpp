// The per-layer time table `cgdp time` prints for every layer and `cgdp profile` for the costliest.
#pragma once

#include <cstdio>
#include <span>
#include <string>

#include "cgdp/cost/profile.hpp"

namespace cgdp::cli {

// One row per layer of `layers` (forward, backward, learnable MiB, and `runs[k]` for layers[k]
// where given: which other layer's work it runs, or where its own runs), then the totals of all
// of `all`: the forward pass, the backward pass, and both.
void print_layer_table(std::span<const LayerCost* const> layers, std::span<const LayerCost> all,
                       const char* heading, FILE* out, std::span<const std::string> runs = {});

}  // namespace cgdp::cli
