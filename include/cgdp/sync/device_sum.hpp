// Summing gradient buffers that live in a device's memory, in stream order: ps0's parents adding
// their children's gradients, and gradient accumulation folding micro-batches. The CPU backend
// runs host_sum's sum_buffers on the stream's thread, the CUDA backend a kernel; both add in the
// fixed order srcs[0] + srcs[1] + ..., so both give host_sum's bits.
#pragma once

#include <cstdint>
#include <vector>

#include "cgdp/device/device.hpp"

namespace cgdp {

// dst[i] = (srcs[0][i] + srcs[1][i]) + ... for i in [0, n), issued on `stream` of a `kind` device.
// dst may be one of the sources exactly.
void issue_sum(Stream& stream, DeviceKind kind, float* dst, std::vector<const float*> srcs,
               int64_t n);

}  // namespace cgdp
