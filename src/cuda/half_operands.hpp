// 16-bit operands on CUDA (issue 36): in bf16 or fp16 (layer_precision()), Convolution,
// Deconvolution and InnerProduct narrow their input, weights and output gradient into 16-bit copies
// on their stream, multiply those on the tensor cores (cuDNN's and cuBLAS's 16-bit kernels, fp32
// sums) and widen what comes out into their fp32 blobs. Activations, parameters and gradients are
// fp32 (activations may wait in 16 bits between the passes: activation_plan.hpp), so the copies
// cost passes over memory that 16-bit activations would save.
#pragma once

#include <cublas_v2.h>
#include <cudnn.h>

#include <cstdint>
#include <type_traits>

#include "cgdp/device/device.hpp"
#include "cgdp/device/layer_precision.hpp"
#include "half_convert.cuh"

namespace cgdp {

kernels::Half16 half16(Precision precision);
cudnnDataType_t cudnn_half_type(Precision precision);
cudaDataType_t cuda_half_type(Precision precision);

// One layer call's 16-bit copies, in its stream's scratch (stream_half_operands): valid until
// the next layer call on the stream asks for them.
struct HalfOperands {
  uint16_t* input = nullptr;
  uint16_t* output = nullptr;  // or the output's gradient
  uint16_t* weights = nullptr;
};
HalfOperands half_operands(Stream& stream, int64_t input, int64_t output, int64_t weights);

// On `stream`, in layer_precision(): dst = narrow(src); then the widenings back to fp32.
uint16_t* narrow_operand(Stream& stream, const float* src, uint16_t* dst, int64_t count);
void widen_result(Stream& stream, const uint16_t* src, float* dst, int64_t count);
void widen_add_result(Stream& stream, const uint16_t* src, float* dst, int64_t count);
// dst = the fp32 value of src's 16-bit copy (what the CPU backend stages: rounded_operands.hpp).
void round_operand(Stream& stream, const float* src, float* dst, int64_t count);

// How a 16-bit copy orders a 4-D operand (images x channels x spatial): as its fp32 blob (NCHW),
// or channels last (NHWC), which cuDNN's tensor-core convolutions read without a transposition
// of their own. The narrowing (and the widening back) transposes on the way.
struct HalfLayout {
  bool channels_last = false;
  int64_t images = 0, channels = 0, spatial = 0;
};
uint16_t* narrow_channels_last(Stream& stream, const float* src, uint16_t* dst,
                               const HalfLayout& layout);
void widen_channels_last(Stream& stream, const uint16_t* src, float* dst, const HalfLayout& layout,
                         bool accumulate, kernels::Epilogue epilogue = {});
// dst = epilogue(widen(src)), src ordered as the layout says, dst NCHW.
void widen_with_epilogue(Stream& stream, const uint16_t* src, float* dst, const HalfLayout& layout,
                         kernels::Epilogue epilogue);

// What a pass reads of values a planned net keeps in 16 bits already (Blob::packed_values): that
// copy itself, or channels last, transposed into `copy`.
const void* packed_operand(Stream& stream, const uint16_t* packed, uint16_t* copy,
                           const HalfLayout& layout);
// What a pass reads: `values` themselves, or (`half`) their 16-bit copy narrowed into `copy`.
template <typename T>
const void* operand_for(bool half, Stream& stream, const T* values, uint16_t* copy, int64_t count,
                        const HalfLayout& layout = {}) {
  if constexpr (std::is_same_v<T, float>)
    if (half)
      return layout.channels_last ? narrow_channels_last(stream, values, copy, layout)
                                  : narrow_operand(stream, values, copy, count);
  return values;
}
// Where a pass writes `values`: themselves, or (`half`) `copy`, which land() widens after.
template <typename T>
void* result_for(bool half, T* values, uint16_t* copy) {
  return half ? static_cast<void*>(copy) : static_cast<void*>(values);
}
// After a pass wrote `copy` (`half`): values = widen(copy), or += with `accumulate`.
template <typename T>
void land(bool half, Stream& stream, const uint16_t* copy, T* values, int64_t count,
          bool accumulate, const HalfLayout& layout = {}) {
  if constexpr (std::is_same_v<T, float>) {
    if (!half) return;
    if (layout.channels_last)
      widen_channels_last(stream, copy, values, layout, accumulate);
    else if (accumulate)
      widen_add_result(stream, copy, values, count);
    else
      widen_result(stream, copy, values, count);
  }
}
// A forward pass's result (`half`: in `copy`, ordered as the layout says, whose shape is the
// output's) widened into `values` with its bias per channel (null: none) and an absorbed ReLU
// added on the way: one pass over the output instead of three. Returns false, doing nothing, where
// the pass wrote `values` itself; the caller then adds them.
template <typename T>
bool land_forward(bool half, Stream& stream, const uint16_t* copy, T* values,
                  const HalfLayout& layout, const T* bias, bool relu) {
  if constexpr (std::is_same_v<T, float>) {
    if (!half) return false;
    const kernels::Epilogue epilogue{bias, relu};
    if (layout.channels_last)
      widen_channels_last(stream, copy, values, layout, /*accumulate=*/false, epilogue);
    else
      widen_with_epilogue(stream, copy, values, layout, epilogue);
    return true;
  }
  return false;
}

}  // namespace cgdp
