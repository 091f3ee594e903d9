// The worker's narrowing and widening for the 16-bit exchange: host loops on a CPU stream,
// kernels/exchange_codec.cu on CUDA.
#include "cgdp/sync/exchange_codec.hpp"

#include <algorithm>
#include <cmath>

#include "cgdp/core/error.hpp"

#ifdef CGDP_HAVE_CUDA
#include "cuda/cuda_check.hpp"
#include "cuda/cuda_stream.hpp"
#include "exchange_codec.cuh"
#endif

namespace cgdp {

namespace {

float max_abs(const float* grads, const std::vector<ElementRange>& parts) {
  float m = 0.f;
  for (const ElementRange& p : parts)
    for (int64_t i = p.offset; i < p.offset + p.count; ++i) m = std::fmax(m, std::fabs(grads[i]));
  return m;
}

void narrow_on_host(ExchangeDtype dtype, const float* grads, uint16_t* staging,
                    const std::vector<ElementRange>& parts, float* scale) {
  float s = 1.f;
  if (dtype == ExchangeDtype::Fp16) *scale = s = fp16_scale_for(max_abs(grads, parts));
  for (const ElementRange& p : parts)
    for (int64_t i = p.offset; i < p.offset + p.count; ++i)
      staging[i] = dtype == ExchangeDtype::Bf16 ? to_bf16(grads[i] * s) : to_fp16(grads[i] * s);
}

void widen_on_host(ExchangeDtype dtype, const uint16_t* staging, float* grads,
                   const std::vector<ElementRange>& parts, const float* scale) {
  const float s = dtype == ExchangeDtype::Fp16 ? *scale : 1.f;
  for (const ElementRange& p : parts)
    for (int64_t i = p.offset; i < p.offset + p.count; ++i)
      grads[i] = (dtype == ExchangeDtype::Bf16 ? from_bf16(staging[i]) : from_fp16(staging[i])) / s;
}

#ifdef CGDP_HAVE_CUDA
kernels::Half16 half16(ExchangeDtype dtype) {
  return dtype == ExchangeDtype::Bf16 ? kernels::Half16::Bf16 : kernels::Half16::Fp16;
}
#endif

#ifndef CGDP_HAVE_CUDA
[[noreturn]] void no_cuda(Stream& stream) {
  throw DeviceError(cat("stream '", stream.name(), "': this cgdp was built without CUDA"));
}
#endif

}  // namespace

void issue_narrow(Stream& stream, DeviceKind kind, ExchangeDtype dtype, const float* grads,
                  uint16_t* staging, std::vector<ElementRange> parts, float* scale) {
  CGDP_ASSERT(dtype != ExchangeDtype::Fp32 && (dtype == ExchangeDtype::Bf16 || scale));
  if (kind == DeviceKind::Cpu) {
    stream.submit(
        [=, parts = std::move(parts)] { narrow_on_host(dtype, grads, staging, parts, scale); });
    return;
  }
#ifdef CGDP_HAVE_CUDA
  stream.submit([&] {
    const cudaStream_t s = native_stream(stream);
    const float* scale_in = nullptr;
    if (dtype == ExchangeDtype::Fp16) {
      CUDA_CHECK(cudaMemsetAsync(scale, 0, sizeof(float), s));
      for (const ElementRange& p : parts) kernels::max_abs(grads + p.offset, p.count, scale, s);
      kernels::fp16_scale_from_max(scale, s);
      scale_in = scale;
    }
    for (const ElementRange& p : parts)
      kernels::narrow(grads + p.offset, staging + p.offset, p.count, half16(dtype), scale_in, s);
  });
#else
  no_cuda(stream);
#endif
}

void issue_widen(Stream& stream, DeviceKind kind, ExchangeDtype dtype, const uint16_t* staging,
                 float* grads, std::vector<ElementRange> parts, const float* scale) {
  CGDP_ASSERT(dtype != ExchangeDtype::Fp32 && (dtype == ExchangeDtype::Bf16 || scale));
  if (kind == DeviceKind::Cpu) {
    stream.submit(
        [=, parts = std::move(parts)] { widen_on_host(dtype, staging, grads, parts, scale); });
    return;
  }
#ifdef CGDP_HAVE_CUDA
  stream.submit([&] {
    const cudaStream_t s = native_stream(stream);
    for (const ElementRange& p : parts)
      kernels::widen(staging + p.offset, grads + p.offset, p.count, half16(dtype),
                     dtype == ExchangeDtype::Fp16 ? scale : nullptr, s);
  });
#else
  no_cuda(stream);
#endif
}

}  // namespace cgdp
