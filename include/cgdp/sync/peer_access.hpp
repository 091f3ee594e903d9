// Direct GPU-to-GPU access for the classic scheme's copies: without it CUDA stages every
// device-to-device copy through host memory, and ps0 would look slower than Caffe's P2PSync is.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "cgdp/device/device.hpp"

namespace cgdp {

// Enables access both ways between the two devices of every pair and returns the line for the
// run's start: which pairs copy directly and which go through the host ("" when no pair is two
// different GPUs, as on the CPU backend).
std::string enable_peer_access(const std::vector<std::pair<Device*, Device*>>& pairs);

}  // namespace cgdp
