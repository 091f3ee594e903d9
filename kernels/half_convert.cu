// fp32 <-> bf16/fp16 elementwise, rounded to nearest even (the hardware's conversions).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "half_convert.cuh"
#include "launch.cuh"

namespace cgdp::kernels {

namespace {

__device__ __forceinline__ uint16_t to_half(float v, Half16 type) {
  return type == Half16::Bf16 ? __bfloat16_as_ushort(__float2bfloat16_rn(v))
                              : __half_as_ushort(__float2half_rn(v));
}

__device__ __forceinline__ float from_half(uint16_t v, Half16 type) {
  return type == Half16::Bf16 ? __bfloat162float(__ushort_as_bfloat16(v))
                              : __half2float(__ushort_as_half(v));
}

__global__ void narrow_kernel(const float* src, uint16_t* dst, int64_t n, Half16 type,
                              const float* scale) {
  const float s = scale ? *scale : 1.f;
  CGDP_KERNEL_LOOP(i, n) {
    dst[i] = to_half(src[i] * s, type);
  }
}

__global__ void narrow_keeping_signs_kernel(const float* src, uint16_t* dst, int64_t n,
                                            Half16 type) {
  CGDP_KERNEL_LOOP(i, n) {
    const float v = src[i];
    const uint16_t h = to_half(v, type);
    dst[i] = (h & 0x7FFF) == 0 && v != 0.f ? (v > 0.f ? 0x0001 : 0x8001) : h;
  }
}

__global__ void widen_kernel(const uint16_t* src, float* dst, int64_t n, Half16 type,
                             const float* scale) {
  const float s = scale ? *scale : 1.f;
  CGDP_KERNEL_LOOP(i, n) {
    dst[i] = from_half(src[i], type) / s;
  }
}

__global__ void widen_add_kernel(const uint16_t* src, float* dst, int64_t n, Half16 type) {
  CGDP_KERNEL_LOOP(i, n) {
    dst[i] += from_half(src[i], type);
  }
}

// The bias, then the ReLU: NaN stays NaN, as through cuDNN's ReLU and the CPU's.
__device__ __forceinline__ float finish(float v, int64_t channel, Epilogue e) {
  if (e.bias) v += e.bias[channel];
  return e.relu && v < 0.f ? 0.f : v;
}

// Planes (an image's channel each) along y, their positions along x, so that a plane's channel
// is found once rather than by a 64-bit division per element; small planes share a block.
__global__ void widen_epilogue_kernel(const uint16_t* src, float* dst, int64_t planes,
                                      int64_t channels, int64_t spatial, Epilogue epilogue,
                                      Half16 type) {
  for (int64_t plane = blockIdx.y * static_cast<int64_t>(blockDim.y) + threadIdx.y; plane < planes;
       plane += static_cast<int64_t>(blockDim.y) * gridDim.y) {
    const int64_t channel = plane % channels;
    const uint16_t* in = src + plane * spatial;
    float* out = dst + plane * spatial;
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < spatial;
         i += static_cast<int64_t>(blockDim.x) * gridDim.x)
      out[i] = finish(from_half(in[i], type), channel, epilogue);
  }
}

__global__ void round_kernel(const float* src, float* dst, int64_t n, Half16 type) {
  CGDP_KERNEL_LOOP(i, n) {
    dst[i] = from_half(to_half(src[i], type), type);
  }
}

// Per image, a rows x cols matrix is written transposed (cols x rows) through a shared tile, so
// that both the reads and the writes are coalesced. store(out, in, c) narrows, widens or adds
// (c: the output's row, the channel where the output is NCHW).
constexpr int kTile = 32;
constexpr int kTileRows = 8;  // threads per tile column: each thread moves kTile / kTileRows

template <typename In, typename Out, typename Store>
__global__ void transpose_kernel(const In* src, Out* dst, int64_t images, int64_t rows,
                                 int64_t cols, Store store) {
  __shared__ In tile[kTile][kTile + 1];  // +1: a column's reads fall in distinct banks
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * kTile;
  for (int64_t r0 = static_cast<int64_t>(blockIdx.y) * kTile; r0 < rows;
       r0 += static_cast<int64_t>(gridDim.y) * kTile)
    for (int64_t i = blockIdx.z; i < images; i += gridDim.z) {
      const In* in = src + i * rows * cols;
      Out* out = dst + i * rows * cols;
      for (int k = threadIdx.y; k < kTile; k += kTileRows) {
        const int64_t r = r0 + k, c = c0 + threadIdx.x;
        if (r < rows && c < cols) tile[k][threadIdx.x] = in[r * cols + c];
      }
      __syncthreads();
      for (int k = threadIdx.y; k < kTile; k += kTileRows) {
        const int64_t c = c0 + k, r = r0 + threadIdx.x;
        if (c < cols && r < rows) store(out[c * rows + r], tile[threadIdx.x][k], c);
      }
      __syncthreads();
    }
}

struct StoreNarrow {
  Half16 type;
  __device__ void operator()(uint16_t& out, float in, int64_t) const { out = to_half(in, type); }
};
struct StoreCopy {
  __device__ void operator()(uint16_t& out, uint16_t in, int64_t) const { out = in; }
};
struct StoreWiden {
  Half16 type;
  __device__ void operator()(float& out, uint16_t in, int64_t) const { out = from_half(in, type); }
};
struct StoreWidenAdd {
  Half16 type;
  __device__ void operator()(float& out, uint16_t in, int64_t) const { out += from_half(in, type); }
};
struct StoreWidenEpilogue {
  Half16 type;
  Epilogue epilogue;
  __device__ void operator()(float& out, uint16_t in, int64_t channel) const {
    out = finish(from_half(in, type), channel, epilogue);
  }
};

template <typename In, typename Out, typename Store>
void transpose(const In* src, Out* dst, int64_t images, int64_t rows, int64_t cols, Store store,
               cudaStream_t stream) {
  constexpr int64_t kMaxGridYZ = 65535;
  const dim3 grid(static_cast<unsigned>((cols + kTile - 1) / kTile),
                  static_cast<unsigned>(std::min((rows + kTile - 1) / kTile, kMaxGridYZ)),
                  static_cast<unsigned>(std::min(images, kMaxGridYZ)));
  transpose_kernel<<<grid, dim3(kTile, kTileRows), 0, stream>>>(src, dst, images, rows, cols,
                                                                store);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void narrow_to_channels_last(const float* src, uint16_t* dst, int64_t images, int64_t channels,
                             int64_t spatial, Half16 type, cudaStream_t stream) {
  if (images * channels * spatial <= 0) return;
  if (channels == 1 || spatial == 1)  // NCHW and NHWC are the same order
    return narrow(src, dst, images * channels * spatial, type, nullptr, stream);
  transpose(src, dst, images, channels, spatial, StoreNarrow{type}, stream);
}

void transpose_to_channels_last(const uint16_t* src, uint16_t* dst, int64_t images,
                                int64_t channels, int64_t spatial, cudaStream_t stream) {
  const int64_t n = images * channels * spatial;
  if (n <= 0) return;
  if (channels == 1 || spatial == 1) {
    CUDA_CHECK(cudaMemcpyAsync(dst, src, static_cast<size_t>(n) * sizeof(uint16_t),
                               cudaMemcpyDeviceToDevice, stream));
    return;
  }
  transpose(src, dst, images, channels, spatial, StoreCopy{}, stream);
}

void widen_from_channels_last(const uint16_t* src, float* dst, int64_t images, int64_t channels,
                              int64_t spatial, Half16 type, bool accumulate, cudaStream_t stream,
                              Epilogue epilogue) {
  const int64_t n = images * channels * spatial;
  if (n <= 0) return;
  const bool finishes = epilogue.bias || epilogue.relu;
  if (finishes && (channels == 1 || spatial == 1))
    return widen_with_epilogue(src, dst, images, channels, spatial, epilogue, type, stream);
  if (channels == 1 || spatial == 1)
    return accumulate ? widen_add(src, dst, n, type, stream)
                      : widen(src, dst, n, type, nullptr, stream);
  if (finishes)
    transpose(src, dst, images, spatial, channels, StoreWidenEpilogue{type, epilogue}, stream);
  else if (accumulate)
    transpose(src, dst, images, spatial, channels, StoreWidenAdd{type}, stream);
  else
    transpose(src, dst, images, spatial, channels, StoreWiden{type}, stream);
}

void narrow(const float* src, uint16_t* dst, int64_t n, Half16 type, const float* scale,
            cudaStream_t stream) {
  if (n <= 0) return;
  narrow_kernel<<<blocks_for(n), kThreads, 0, stream>>>(src, dst, n, type, scale);
  CUDA_CHECK_LAUNCH();
}

void narrow_keeping_signs(const float* src, uint16_t* dst, int64_t n, Half16 type,
                          cudaStream_t stream) {
  if (n <= 0) return;
  narrow_keeping_signs_kernel<<<blocks_for(n), kThreads, 0, stream>>>(src, dst, n, type);
  CUDA_CHECK_LAUNCH();
}

void widen(const uint16_t* src, float* dst, int64_t n, Half16 type, const float* scale,
           cudaStream_t stream) {
  if (n <= 0) return;
  widen_kernel<<<blocks_for(n), kThreads, 0, stream>>>(src, dst, n, type, scale);
  CUDA_CHECK_LAUNCH();
}

void widen_add(const uint16_t* src, float* dst, int64_t n, Half16 type, cudaStream_t stream) {
  if (n <= 0) return;
  widen_add_kernel<<<blocks_for(n), kThreads, 0, stream>>>(src, dst, n, type);
  CUDA_CHECK_LAUNCH();
}

void widen_with_epilogue(const uint16_t* src, float* dst, int64_t images, int64_t channels,
                         int64_t spatial, Epilogue epilogue, Half16 type, cudaStream_t stream) {
  const int64_t n = images * channels * spatial;
  if (n <= 0) return;
  if (!epilogue.bias && !epilogue.relu) return widen(src, dst, n, type, nullptr, stream);
  constexpr int64_t kMaxGridY = 65535;
  const int64_t planes = images * channels;
  int threads_x = 1;  // a power of two: spatial's, up to a block
  while (threads_x < kThreads && threads_x < spatial) threads_x *= 2;
  const dim3 block(threads_x, kThreads / threads_x);
  const int64_t rows = block.y;
  const dim3 grid(
      static_cast<unsigned>(std::min<int64_t>((spatial + threads_x - 1) / threads_x, 8192)),
      static_cast<unsigned>(std::min((planes + rows - 1) / rows, kMaxGridY)));
  widen_epilogue_kernel<<<grid, block, 0, stream>>>(src, dst, planes, channels, spatial, epilogue,
                                                    type);
  CUDA_CHECK_LAUNCH();
}

void round_to_half(const float* src, float* dst, int64_t n, Half16 type, cudaStream_t stream) {
  if (n <= 0) return;
  round_kernel<<<blocks_for(n), kThreads, 0, stream>>>(src, dst, n, type);
  CUDA_CHECK_LAUNCH();
}

}  // namespace cgdp::kernels
