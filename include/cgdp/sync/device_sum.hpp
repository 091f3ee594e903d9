// Summing gradient buffers that live in a device's memory, in stream order: ps0's parents adding
// their children's gradients, and gradient accumulation folding micro-batches. The CPU backend
// runs host_sum's sum_buffers on the stream's thread, the CUDA backend a kernel; both add in
// host_sum's binary-tree order, so both give the same bits.
#pragma once

#include <cstdint>
#include <vector>

#include "cgdp/device/device.hpp"

namespace cgdp {

// dst[i] = the tree-order sum of srcs[.][i] for i in [0, n), issued on `stream` of a `kind` device
// (at most 32 sources on CUDA).
// dst may be one of the sources exactly.
void issue_sum(Stream& stream, DeviceKind kind, float* dst, std::vector<const float*> srcs,
               int64_t n);

}  // namespace cgdp
