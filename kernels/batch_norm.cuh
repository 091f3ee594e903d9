// Launchers for Caffe's BatchNorm (the CPU layer's statistics, running sums and backward), on a
// bottom viewed as num x channels x spatial.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace cgdp::kernels {

struct BatchNormShape {
  int64_t num = 0, channels = 0, spatial = 0;
};

// Training: per channel, mean and biased variance of the batch (float64 sums), then Caffe's
// running update: mean_sum = fraction * mean_sum + mean, variance_sum = fraction * variance_sum
// + correction * variance, factor = factor * fraction + 1.
template <typename T>
void batch_norm_statistics(const T* x, const BatchNormShape& s, T* mean, T* variance, T* mean_sum,
                           T* variance_sum, T* factor, T fraction, T correction,
                           cudaStream_t stream);
// use_global_stats: mean = mean_sum / factor, variance = variance_sum / factor (0 if factor is 0).
template <typename T>
void batch_norm_global_statistics(const T* mean_sum, const T* variance_sum, const T* factor,
                                  int64_t channels, T* mean, T* variance, cudaStream_t stream);
// inv_std = 1 / sqrt(variance + eps); y = x_norm = (x - mean) * inv_std (y may be x).
template <typename T>
void batch_norm_normalize(const T* x, const BatchNormShape& s, const T* mean, const T* variance,
                          T eps, T* inv_std, T* y, T* x_norm, cudaStream_t stream);
// dx = (dy - mean(dy) - x_norm * mean(dy * x_norm)) * inv_std, the means over each channel
// (float64), or dy * inv_std with the global statistics.
template <typename T>
void batch_norm_backward(const T* dy, const T* x_norm, const T* inv_std, const BatchNormShape& s,
                         bool global, T* dx, cudaStream_t stream);

}  // namespace cgdp::kernels
