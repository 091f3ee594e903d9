// The 16-bit operands' scratch and conversions, on the layer's stream.
#include "half_operands.hpp"

#include "cuda_libraries.hpp"
#include "cuda_stream.hpp"

namespace cgdp {

kernels::Half16 half16(Precision precision) {
  return precision == Precision::kFp16 ? kernels::Half16::Fp16 : kernels::Half16::Bf16;
}

cudnnDataType_t cudnn_half_type(Precision precision) {
  return precision == Precision::kFp16 ? CUDNN_DATA_HALF : CUDNN_DATA_BFLOAT16;
}

cudaDataType_t cuda_half_type(Precision precision) {
  return precision == Precision::kFp16 ? CUDA_R_16F : CUDA_R_16BF;
}

HalfOperands half_operands(Stream& stream, int64_t input, int64_t output, int64_t weights) {
  auto* base = static_cast<char*>(stream_half_operands(
      stream, static_cast<size_t>(half_operand_bytes(input, output, weights))));
  HalfOperands o;
  o.input = reinterpret_cast<uint16_t*>(base);
  o.output = reinterpret_cast<uint16_t*>(base + half_operand_bytes(input, 0, 0));
  o.weights = reinterpret_cast<uint16_t*>(base + half_operand_bytes(input, output, 0));
  return o;
}

uint16_t* narrow_operand(Stream& stream, const float* src, uint16_t* dst, int64_t count) {
  kernels::narrow(src, dst, count, half16(layer_precision()), nullptr, native_stream(stream));
  return dst;
}

void widen_result(Stream& stream, const uint16_t* src, float* dst, int64_t count) {
  kernels::widen(src, dst, count, half16(layer_precision()), nullptr, native_stream(stream));
}

void widen_add_result(Stream& stream, const uint16_t* src, float* dst, int64_t count) {
  kernels::widen_add(src, dst, count, half16(layer_precision()), native_stream(stream));
}

uint16_t* narrow_channels_last(Stream& stream, const float* src, uint16_t* dst,
                               const HalfLayout& layout) {
  kernels::narrow_to_channels_last(src, dst, layout.images, layout.channels, layout.spatial,
                                   half16(layer_precision()), native_stream(stream));
  return dst;
}

const void* packed_operand(Stream& stream, const uint16_t* packed, uint16_t* copy,
                           const HalfLayout& layout) {
  if (!layout.channels_last) return packed;
  kernels::transpose_to_channels_last(packed, copy, layout.images, layout.channels, layout.spatial,
                                      native_stream(stream));
  return copy;
}

void widen_channels_last(Stream& stream, const uint16_t* src, float* dst, const HalfLayout& layout,
                         bool accumulate, kernels::Epilogue epilogue) {
  kernels::widen_from_channels_last(src, dst, layout.images, layout.channels, layout.spatial,
                                    half16(layer_precision()), accumulate, native_stream(stream),
                                    epilogue);
}

void widen_with_epilogue(Stream& stream, const uint16_t* src, float* dst, const HalfLayout& layout,
                         kernels::Epilogue epilogue) {
  kernels::widen_with_epilogue(src, dst, layout.images, layout.channels, layout.spatial, epilogue,
                               half16(layer_precision()), native_stream(stream));
}

void round_operand(Stream& stream, const float* src, float* dst, int64_t count) {
  kernels::round_to_half(src, dst, count, half16(layer_precision()), native_stream(stream));
}

}  // namespace cgdp
