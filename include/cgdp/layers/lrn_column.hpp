// LRN ACROSS_CHANNELS for one column (one pixel of one image, all its channels). The backward from
// the input and the output gradient alone: the scale, the output and the windowed ratios are
// computed again on the way down the channels, in rings of the last few, so forward keeps nothing
// (the CUDA layer's forward and backward: kernels/lrn.cu runs one column per thread).
// Formulas as lrn_layer.cpp's; the sums in channel order, as there.
// nvcc compiles this header too: plain C++17, math from <math.h>, no cgdp headers.
#pragma once

#include <math.h>
#include <string.h>

#include <cstdint>

#if defined(__CUDACC__)
#define CGDP_LRN_FN __host__ __device__
#else
#define CGDP_LRN_FN
#endif

namespace cgdp::lrn {

// The rings hold a window and a half-window more: local_size up to 15 (it is odd).
inline constexpr int kRing = 16;
inline constexpr int kMaxColumnWindow = kRing - 1;

template <typename T>
CGDP_LRN_FN T inverse_power(T scale, T beta) {
  return beta == T(0.75) ? T(1) / sqrt(scale * sqrt(scale)) : pow(scale, -beta);
}

// bf16 numbers read as floats: the column's input from a copy kept in bf16 (Blob::packed_values).
struct Bf16Values {
  const uint16_t* bits;
  CGDP_LRN_FN float operator[](int64_t i) const {
    uint32_t word = static_cast<uint32_t>(bits[i]) << 16;
    float value;
    memcpy(&value, &word, sizeof value);
    return value;
  }
};

// The sum over channels [c - half, c + half] (within [0, channels)) of a ring indexed by
// channel % kRing, in channel order.
template <typename T>
CGDP_LRN_FN T ring_window(const T* ring, int c, int half, int channels) {
  T sum = 0;
  const int last = c + half < channels - 1 ? c + half : channels - 1;
  for (int n = c - half > 0 ? c - half : 0; n <= last; ++n) sum += ring[n % kRing];
  return sum;
}

// The forward, y = x * scale^-beta, down one column. y may be x: channel c's output is written
// once the window ahead of it was read into the rings, so nothing it needs is overwritten.
template <typename T>
CGDP_LRN_FN void across_forward_column(const T* x, T* y, int64_t stride, int channels, int size,
                                       T alpha_over_n, T k, T beta) {
  const int half = (size - 1) / 2;
  T values[kRing], squares[kRing];  // by channel % kRing
  for (int t = 0; t < channels + half; ++t) {
    if (t < channels) {
      const T v = x[t * stride];
      values[t % kRing] = v;
      squares[t % kRing] = v * v;
    }
    if (const int c = t - half; c >= 0) {
      const T scale = k + alpha_over_n * ring_window(squares, c, half, channels);
      y[c * stride] = values[c % kRing] * inverse_power(scale, beta);
    }
  }
}

// x (a pointer, or Bf16Values), dy, dx hold the column's channel 0; channel c is c * stride
// elements further. size: the window (odd, at most kMaxColumnWindow).
template <typename T, typename Input>
CGDP_LRN_FN void across_backward_column(Input x, const T* dy, T* dx, int64_t stride, int channels,
                                        int size, T alpha_over_n, T k, T beta) {
  const int half = (size - 1) / 2;
  T squares[kRing], ratios[kRing], powers[kRing];  // by channel % kRing
  const auto window = [&](const T* ring, int c) { return ring_window(ring, c, half, channels); };
  // At step t: channel t's square; channel t - half's scale and ratio (its window of squares
  // ends at t); channel t - 2 half's gradient (its window of ratios ends at t - half).
  for (int t = 0; t < channels + 2 * half; ++t) {
    if (t < channels) {
      const T v = x[t * stride];
      squares[t % kRing] = v * v;
    }
    if (const int c = t - half; c >= 0 && c < channels) {
      const T scale = k + alpha_over_n * window(squares, c);
      const T power = inverse_power(scale, beta);
      const T out = x[c * stride] * power;
      powers[c % kRing] = power;
      ratios[c % kRing] = dy[c * stride] * out / scale;
    }
    if (const int c = t - 2 * half; c >= 0) {
      const T sum = window(ratios, c);
      dx[c * stride] =
          sum * (-2 * alpha_over_n * beta * x[c * stride]) + dy[c * stride] * powers[c % kRing];
    }
  }
}

}  // namespace cgdp::lrn
