// Stochastic pooling on the GPU, the twin of src/layers/stochastic_pooling_layer.cpp: the same
// counter-based draw and the same order of sums, so both backends pick the same inputs.
#include "cgdp/core/counter_rng.hpp"
#include "launch.cuh"
#include "stochastic_pooling.cuh"

namespace cgdp::kernels {

namespace {

template <typename T>
__global__ void forward_kernel(const T* x, StochasticPoolGeometry g, bool train, uint64_t step_key,
                               int64_t sample_offset, T* y, T* chosen) {
  const int64_t outputs = g.pooled_h * g.pooled_w;
  CGDP_KERNEL_LOOP(out, g.planes * outputs) {
    const int64_t plane = out / outputs, o = out % outputs;
    const T* in = x + plane * g.height * g.width;
    const int64_t h0 = o / g.pooled_w * g.stride_h, w0 = o % g.pooled_w * g.stride_w;
    const int64_t h1 = min64(h0 + g.kernel_h, g.height), w1 = min64(w0 + g.kernel_w, g.width);
    T sum = 0, squares = 0;
    for (int64_t h = h0; h < h1; ++h)
      for (int64_t w = w0; w < w1; ++w) sum += in[h * g.width + w], squares += in[h * g.width + w] * in[h * g.width + w];
    if (!train) {
      y[out] = sum > T(0) ? squares / sum : T(0);
      chosen[out] = sum;
      continue;
    }
    const CounterRng draws(fold_counter(step_key, static_cast<uint64_t>(sample_offset + plane / g.channels)));
    const T threshold = static_cast<T>(draws.uniform(static_cast<uint64_t>((plane % g.channels) * outputs + o))) * sum;
    T running = 0;
    int64_t pick = h0 * g.width + w0;
    bool done = false;
    for (int64_t h = h0; h < h1 && !done; ++h)
      for (int64_t w = w0; w < w1; ++w) {
        running += in[h * g.width + w];
        if (running >= threshold) {
          pick = h * g.width + w;
          done = true;
          break;
        }
      }
    y[out] = in[pick];
    chosen[out] = static_cast<T>(pick);
  }
}

template <typename T>
__global__ void backward_kernel(const T* x, const T* y, const T* dy, const T* chosen, StochasticPoolGeometry g, bool train,
                                T* dx) {
  CGDP_KERNEL_LOOP(i, g.planes * g.height * g.width) {
    const int64_t w = i % g.width, h = i / g.width % g.height, plane = i / (g.width * g.height);
    const int64_t ph0 = h < g.kernel_h ? 0 : (h - g.kernel_h) / g.stride_h + 1;
    const int64_t ph1 = min64(h / g.stride_h + 1, g.pooled_h);
    const int64_t pw0 = w < g.kernel_w ? 0 : (w - g.kernel_w) / g.stride_w + 1;
    const int64_t pw1 = min64(w / g.stride_w + 1, g.pooled_w);
    T sum = 0;
    for (int64_t ph = ph0; ph < ph1; ++ph)
      for (int64_t pw = pw0; pw < pw1; ++pw) {
        const int64_t o = (plane * g.pooled_h + ph) * g.pooled_w + pw;
        if (train && static_cast<int64_t>(chosen[o]) == h * g.width + w) sum += dy[o];
        if (!train && chosen[o] > T(0)) sum += dy[o] * (2 * x[i] - y[o]) / chosen[o];
      }
    dx[i] = sum;
  }
}

}  // namespace

template <typename T>
void stochastic_pool_forward(const T* x, const StochasticPoolGeometry& g, bool train, uint64_t step_key,
                             int64_t sample_offset, T* y, T* chosen, cudaStream_t stream) {
  const int64_t n = g.planes * g.pooled_h * g.pooled_w;
  if (n <= 0) return;
  forward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, g, train, step_key, sample_offset, y, chosen);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void stochastic_pool_backward(const T* x, const T* y, const T* dy, const T* chosen, const StochasticPoolGeometry& g,
                              bool train, T* dx, cudaStream_t stream) {
  const int64_t n = g.planes * g.height * g.width;
  if (n <= 0) return;
  backward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, y, dy, chosen, g, train, dx);
  CUDA_CHECK_LAUNCH();
}

template void stochastic_pool_forward<float>(const float*, const StochasticPoolGeometry&, bool, uint64_t, int64_t,
                                             float*, float*, cudaStream_t);
template void stochastic_pool_forward<double>(const double*, const StochasticPoolGeometry&, bool, uint64_t, int64_t,
                                              double*, double*, cudaStream_t);
template void stochastic_pool_backward<float>(const float*, const float*, const float*, const float*,
                                              const StochasticPoolGeometry&, bool, float*, cudaStream_t);
template void stochastic_pool_backward<double>(const double*, const double*, const double*, const double*,
                                               const StochasticPoolGeometry&, bool, double*, cudaStream_t);

}  // namespace cgdp::kernels
