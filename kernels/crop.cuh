// Launchers for Crop (crop_layer.hpp): an N-d region of bottom 0, up to kMaxCropAxes axes.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace cgdp::kernels {

constexpr int kMaxCropAxes = 8;

struct CropGeometry {
  int axes = 0;
  int64_t top[kMaxCropAxes] = {}, in[kMaxCropAxes] = {}, offset[kMaxCropAxes] = {};
};

// y[i] = x[the place of top element i in bottom 0].
template <typename T>
void crop_forward(const T* x, const CropGeometry& g, int64_t top_count, T* y, cudaStream_t stream);
// dx = 0, then dx[the place of i] = dy[i].
template <typename T>
void crop_backward(const T* dy, const CropGeometry& g, int64_t top_count, int64_t in_count, T* dx, cudaStream_t stream);

}  // namespace cgdp::kernels
