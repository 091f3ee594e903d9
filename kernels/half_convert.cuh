// Conversions between fp32 and the 16-bit formats (bf16, fp16), rounded to nearest even: the
// 16-bit exchange narrows gradients for PCIe (src/sync/exchange_codec.cpp), and the multiplying
// layers narrow their operands for the tensor cores (src/cuda/half_operands.hpp).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace cgdp::kernels {

enum class Half16 { Bf16, Fp16 };

// dst[i] = narrow(src[i] * *scale) (scale null: 1).
void narrow(const float* src, uint16_t* dst, int64_t n, Half16 type, const float* scale,
            cudaStream_t stream);
// narrow(src[i]), but a nonzero value that would round to zero keeps its sign as the smallest
// 16-bit number of that sign (a copy read only for its signs: narrow_keeping_signs on the CPU).
void narrow_keeping_signs(const float* src, uint16_t* dst, int64_t n, Half16 type,
                          cudaStream_t stream);
// dst[i] = widen(src[i]) / *scale (scale null: 1).
void widen(const uint16_t* src, float* dst, int64_t n, Half16 type, const float* scale,
           cudaStream_t stream);
// dst[i] += widen(src[i]): a 16-bit gradient added to an fp32 one that accumulates.
void widen_add(const uint16_t* src, float* dst, int64_t n, Half16 type, cudaStream_t stream);
// dst[i] = widen(narrow(src[i])): the fp32 value a 16-bit operand holds (dst may be src).
void round_to_half(const float* src, float* dst, int64_t n, Half16 type, cudaStream_t stream);

// Per image, NCHW's channels x spatial values narrowed into NHWC's spatial x channels (the layout
// cuDNN's tensor-core kernels read without transposing on their own).
void narrow_to_channels_last(const float* src, uint16_t* dst, int64_t images, int64_t channels,
                             int64_t spatial, Half16 type, cudaStream_t stream);
// A 16-bit NCHW copy (a value the net keeps packed) moved into NHWC as it is.
void transpose_to_channels_last(const uint16_t* src, uint16_t* dst, int64_t images,
                                int64_t channels, int64_t spatial, cudaStream_t stream);
// What joins a forward pass's result as it is widened, instead of in passes of its own over the
// fp32 output: a bias per channel (null: none), then a ReLU (a convolution's absorbed one).
struct Epilogue {
  const float* bias = nullptr;
  bool relu = false;
};

// The way back: NHWC's 16-bit values widened into NCHW (dst = or, with `accumulate`, dst +=);
// with an epilogue (not with `accumulate`), dst = epilogue(widened).
void widen_from_channels_last(const uint16_t* src, float* dst, int64_t images, int64_t channels,
                              int64_t spatial, Half16 type, bool accumulate, cudaStream_t stream,
                              Epilogue epilogue = {});
// NCHW: dst = epilogue(widen(src)).
void widen_with_epilogue(const uint16_t* src, float* dst, int64_t images, int64_t channels,
                         int64_t spatial, Epilogue epilogue, Half16 type, cudaStream_t stream);

}  // namespace cgdp::kernels
