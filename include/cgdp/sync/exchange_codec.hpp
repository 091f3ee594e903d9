// A worker's side of the 16-bit exchange (exchange_dtype.hpp): its gradients narrowed into a
// 16-bit staging buffer before the copy to the host, and the sum that came back widened into its
// gradient buffer. Issued on one of the worker's streams: host loops that run as the stream's
// work on CPU devices, kernels/exchange_codec.cu on CUDA. Buffers are indexed by flat offset.
#pragma once

#include <cstdint>
#include <vector>

#include "cgdp/device/device.hpp"
#include "cgdp/sync/element_range.hpp"
#include "cgdp/sync/exchange_dtype.hpp"

namespace cgdp {

// staging[i] = narrow(grads[i] * s) for every element i of `parts` (bf16 or fp16). fp16: s =
// fp16_scale_for(the largest |grads[i]| over the parts), first written to *scale (device memory);
// bf16: s = 1 and `scale` is not used.
void issue_narrow(Stream& stream, DeviceKind kind, ExchangeDtype dtype, const float* grads,
                  uint16_t* staging, std::vector<ElementRange> parts, float* scale);
// grads[i] = widen(staging[i]) / *scale (fp16; bf16: no scale) for every element of `parts`.
void issue_widen(Stream& stream, DeviceKind kind, ExchangeDtype dtype, const uint16_t* staging,
                 float* grads, std::vector<ElementRange> parts, const float* scale);

}  // namespace cgdp
