// Launchers for LRN as the CPU layer computes it, keeping a scale (WITHIN_CHANNEL, and
// ACROSS_CHANNELS with a window wider than lrn::kMaxColumnWindow), and ACROSS_CHANNELS a column
// per thread, keeping nothing.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace cgdp::kernels {

struct LrnShape {
  int64_t num = 0, channels = 0, height = 0, width = 0;
  int64_t size = 5;     // odd window width
  bool across = true;   // ACROSS_CHANNELS; else a size x size square within each channel
};

// scale = k + alpha_over_n * (window sum of x^2); y = x * scale^-beta. `scale` is kept for backward.
template <typename T>
void lrn_forward(const T* x, T* scale, T* y, const LrnShape& s, T alpha_over_n, T k, T beta,
                 cudaStream_t stream);
// y = x * scale^-beta again; work = dy * y / scale;
// dx = dy * scale^-beta - 2 * alpha_over_n * beta * x * (window sum of work).
template <typename T>
void lrn_backward(const T* x, const T* scale, const T* dy, T* work, T* dx, const LrnShape& s,
                  T alpha_over_n, T beta, cudaStream_t stream);
// ACROSS_CHANNELS' forward one column per thread (layers/lrn_column.hpp; s.size at most
// lrn::kMaxColumnWindow), y possibly x; it keeps no scale.
template <typename T>
void lrn_across_forward(const T* x, T* y, const LrnShape& s, T alpha_over_n, T k, T beta,
                        cudaStream_t stream);
// ACROSS_CHANNELS (s.size at most lrn::kMaxColumnWindow) from x and dy alone, one column of
// channels per thread (layers/lrn_column.hpp): after lrn_across_forward, which keeps no scale.
template <typename T>
void lrn_across_backward(const T* x, const T* dy, T* dx, const LrnShape& s, T alpha_over_n, T k,
                         T beta, cudaStream_t stream);
// The same from x's bf16 copy (a value the net keeps packed), widened as it is read.
template <typename T>
void lrn_across_backward_bf16(const uint16_t* x, const T* dy, T* dx, const LrnShape& s,
                              T alpha_over_n, T k, T beta, cudaStream_t stream);

}  // namespace cgdp::kernels
