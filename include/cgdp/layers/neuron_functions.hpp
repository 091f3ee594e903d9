// Caffe's elementwise ("neuron") layers as functions of one element: forward y = f(x) and backward
// dx = dy * f'(x), written once for the CPU loop (src/layers/neuron_layer.cpp) and the CUDA kernel
// (kernels/neuron.cu). Formulas and edge cases follow Caffe's layers of the same name.
// nvcc compiles this header too: plain C++17, math from <math.h>, no cgdp headers.
#pragma once

#include <math.h>

#if defined(__CUDACC__)
#define CGDP_NEURON_FN __host__ __device__
#else
#define CGDP_NEURON_FN
#endif

namespace cgdp::neuron {

// y = 1 / (1 + e^-x); dx = dy y (1 - y).
template <typename T>
struct Sigmoid {
  static constexpr bool kBackwardReadsX = false;
  CGDP_NEURON_FN T forward(T x) const { return T(1) / (T(1) + exp(-x)); }
  CGDP_NEURON_FN T backward(T, T y, T dy) const { return dy * y * (T(1) - y); }
};

// y = tanh(x); dx = dy (1 - y^2).
template <typename T>
struct TanH {
  static constexpr bool kBackwardReadsX = false;
  CGDP_NEURON_FN T forward(T x) const { return tanh(x); }
  CGDP_NEURON_FN T backward(T, T y, T dy) const { return dy * (T(1) - y * y); }
};

// y = |x|; dx = dy sign(x), 0 at 0.
template <typename T>
struct AbsVal {
  static constexpr bool kBackwardReadsX = true;
  CGDP_NEURON_FN T forward(T x) const { return x < T(0) ? -x : x; }
  CGDP_NEURON_FN T backward(T x, T, T dy) const { return dy * T((T(0) < x) - (x < T(0))); }
};

// Binomial normal log likelihood: y = log(1 + e^x), written to stay finite for large |x|;
// dx = dy e^x / (1 + e^x), with x capped at 50 as Caffe's kBNLL_THRESHOLD.
template <typename T>
struct BNLL {
  static constexpr bool kBackwardReadsX = true;
  CGDP_NEURON_FN T forward(T x) const { return x > T(0) ? x + log(T(1) + exp(-x)) : log(T(1) + exp(x)); }
  CGDP_NEURON_FN T backward(T x, T, T dy) const {
    const T e = exp(x < T(50) ? x : T(50));
    return dy * e / (e + T(1));
  }
};

// y = (shift + scale x)^power; dx = dy power scale (shift + scale x)^(power - 1).
template <typename T>
struct Power {
  static constexpr bool kBackwardReadsX = true;
  T power, scale, shift;
  CGDP_NEURON_FN T forward(T x) const { return pow(shift + scale * x, power); }
  CGDP_NEURON_FN T backward(T x, T, T dy) const {
    const T diff_scale = power * scale;
    if (diff_scale == T(0)) return T(0);  // a constant output (Caffe's shortcut)
    return dy * diff_scale * pow(shift + scale * x, power - T(1));
  }
};

// y = base^(shift + scale x) (base -1: e) = outer e^(inner x), inner = ln(base) scale,
// outer = base^shift; dx = dy y inner.
template <typename T>
struct Exp {
  static constexpr bool kBackwardReadsX = false;
  T inner, outer;
  CGDP_NEURON_FN T forward(T x) const { return outer * exp(inner * x); }
  CGDP_NEURON_FN T backward(T, T y, T dy) const { return dy * y * inner; }
};

// y = log_base(shift + scale x) (base -1: e) = ln(shift + scale x) / ln(base);
// dx = dy scale / ((shift + scale x) ln(base)).
template <typename T>
struct Log {
  static constexpr bool kBackwardReadsX = true;
  T scale, shift, base_scale;  // base_scale = 1 / ln(base)
  CGDP_NEURON_FN T forward(T x) const { return log(shift + scale * x) * base_scale; }
  CGDP_NEURON_FN T backward(T x, T, T dy) const { return dy * scale * base_scale / (shift + scale * x); }
};

// y = x > 0 ? x : alpha (e^x - 1); dx = dy (x > 0 ? 1 : y + alpha). In place, x is y, whose sign
// is x's for alpha >= 0 (the layer refuses in place otherwise).
template <typename T>
struct ELU {
  static constexpr bool kBackwardReadsX = false;
  T alpha;
  CGDP_NEURON_FN T forward(T x) const { return x > T(0) ? x : alpha * (exp(x) - T(1)); }
  CGDP_NEURON_FN T backward(T x, T y, T dy) const { return x > T(0) ? dy : dy * (y + alpha); }
};

// y = x > threshold ? 1 : 0. A step has no useful gradient: Caffe gives it none, nor does cgdp.
template <typename T>
struct Threshold {
  static constexpr bool kBackwardReadsX = false;
  T threshold;
  CGDP_NEURON_FN T forward(T x) const { return x > threshold ? T(1) : T(0); }
  CGDP_NEURON_FN T backward(T, T, T) const { return T(0); }
};

}  // namespace cgdp::neuron
