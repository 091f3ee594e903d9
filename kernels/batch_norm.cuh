// Launchers for Caffe's BatchNorm (the CPU layer's statistics, running sums and backward), on a
// bottom viewed as num x channels x spatial.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace cgdp::kernels {

struct BatchNormShape {
  int64_t num = 0, channels = 0, spatial = 0;
};

// A Scale (one scale per channel, a bias or none) that runs inside the BatchNorm
// (Net::fuse_batch_norm_scales): all null when none does.
template <typename T>
struct ScaleInside {
  const T* scale = nullptr;
  const T* bias = nullptr;
  T* scale_diff = nullptr;  // += its gradients (backward)
  T* bias_diff = nullptr;
  bool relu = false;  // forward: the in-place ReLU after the Scale too (negative_slope 0)
};

// Device scratch the statistics and the backward need (`scratch` below), a few KiB: float64
// partial sums per channel and slice of the batch.
int64_t batch_norm_scratch_bytes(const BatchNormShape& s);

// Training: per channel, mean and biased variance of the batch (float64 sums), then Caffe's
// running update: mean_sum = fraction * mean_sum + mean, variance_sum = fraction * variance_sum
// + correction * variance, factor = factor * fraction + 1.
template <typename T>
void batch_norm_statistics(const T* x, const BatchNormShape& s, T* mean, T* variance, T* mean_sum,
                           T* variance_sum, T* factor, T fraction, T correction, void* scratch,
                           cudaStream_t stream);
// use_global_stats: mean = mean_sum / factor, variance = variance_sum / factor (0 if factor is 0).
template <typename T>
void batch_norm_global_statistics(const T* mean_sum, const T* variance_sum, const T* factor,
                                  int64_t channels, T* mean, T* variance, cudaStream_t stream);
// inv_std = 1 / sqrt(variance + eps); x_norm = (x - mean) * inv_std, then y = x_norm, or with a
// Scale inside y = x_norm * scale + bias, and with its ReLU inside y = relu(that) in the ReLU
// kernel's expression (y may be x, and x_norm may be y).
template <typename T>
void batch_norm_normalize(const T* x, const BatchNormShape& s, const T* mean, const T* variance,
                          T eps, T* inv_std, T* y, T* x_norm, const ScaleInside<T>& inside,
                          cudaStream_t stream);
// dx = (g - mean(g) - x_norm * mean(g * x_norm)) * inv_std, the means over each channel
// (float64), or g * inv_std with the global statistics; g = dy, or with a Scale inside dy * scale
// (its means taken as scale times those of dy), whose gradients get the sums of dy * x_norm and
// of dy. dx may be dy.
template <typename T>
void batch_norm_backward(const T* dy, const T* x_norm, const T* inv_std, const BatchNormShape& s,
                         bool global, const ScaleInside<T>& inside, T* dx, void* scratch,
                         cudaStream_t stream);

}  // namespace cgdp::kernels
