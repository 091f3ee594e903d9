// Scale kernels: elementwise forward and input gradient by planes; the parameter gradients as
// per-channel sums in slices of images (per_channel.cuh).
#include "per_channel.cuh"
#include "scale.cuh"

namespace cgdp::kernels {

namespace {

ChannelView view_of(const ScaleShape& s) {
  return {s.outer, s.dim, s.inner};
}

template <typename T>
__global__ void forward_kernel(const T* x, const T* scale, const T* bias, ChannelView v, bool flat,
                               T* y) {
  for_elements(v, flat,
               [&](int64_t i, int64_t d) { y[i] = x[i] * scale[d] + (bias ? bias[d] : T(0)); });
}

// Sums of dy * x (the product in T, as the CPU layer computes it) and of dy.
template <typename T>
__global__ void param_partials_kernel(const T* x, const T* dy, ChannelView v, double* partials) {
  slice_sums(
      v,
      [&](int64_t i, int64_t) {
        return make_double2(static_cast<double>(dy[i] * x[i]), static_cast<double>(dy[i]));
      },
      partials);
}

template <typename T>
__global__ void param_diff_kernel(ChannelView v, const double* partials, T* scale_diff,
                                  T* bias_diff) {
  CGDP_KERNEL_LOOP(d, v.channels) {
    const double2 sums = channel_sums(v, partials, d);
    scale_diff[d] += static_cast<T>(sums.x);
    if (bias_diff) bias_diff[d] += static_cast<T>(sums.y);
  }
}

template <typename T>
__global__ void input_diff_kernel(const T* dy, const T* scale, ChannelView v, bool flat, T* dx) {
  for_elements(v, flat, [&](int64_t i, int64_t d) { dx[i] = dy[i] * scale[d]; });
}

}  // namespace

int64_t scale_scratch_bytes(const ScaleShape& s) {
  return per_channel_scratch_bytes(view_of(s));
}

template <typename T>
void scale_forward(const T* x, const T* scale, const T* bias, const ScaleShape& s, T* y,
                   cudaStream_t stream) {
  if (s.outer * s.dim * s.inner <= 0) return;
  const PlaneLaunch launch = plane_launch(view_of(s));
  forward_kernel<<<launch.grid, kThreads, 0, stream>>>(x, scale, bias, view_of(s), launch.flat, y);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void scale_backward(const T* x, const T* dy, const T* scale, const ScaleShape& s, T* scale_diff,
                    T* bias_diff, T* dx, void* scratch, cudaStream_t stream) {
  if (s.outer * s.dim * s.inner <= 0) return;
  const ChannelView v = view_of(s);
  auto* partials = static_cast<double*>(scratch);
  param_partials_kernel<<<slice_grid(v), kReduceThreads, 0, stream>>>(x, dy, v, partials);
  CUDA_CHECK_LAUNCH();
  param_diff_kernel<<<blocks_for(s.dim), kThreads, 0, stream>>>(v, partials, scale_diff, bias_diff);
  CUDA_CHECK_LAUNCH();
  if (!dx) return;
  const PlaneLaunch launch = plane_launch(v);
  input_diff_kernel<<<launch.grid, kThreads, 0, stream>>>(dy, scale, v, launch.flat, dx);
  CUDA_CHECK_LAUNCH();
}

#define CGDP_INSTANTIATE(T)                                                                    \
  template void scale_forward<T>(const T*, const T*, const T*, const ScaleShape&, T*,          \
                                 cudaStream_t);                                                \
  template void scale_backward<T>(const T*, const T*, const T*, const ScaleShape&, T*, T*, T*, \
                                  void*, cudaStream_t);
CGDP_INSTANTIATE(float)
CGDP_INSTANTIATE(double)
#undef CGDP_INSTANTIATE

}  // namespace cgdp::kernels
