// ArgMax on the GPU, the twin of src/layers/argmax_layer.cpp: the j-th pick is the largest
// (value, index) pair below the (j-1)-th, so ties go to the larger index as Caffe's sort has them.
#include "argmax.cuh"
#include "launch.cuh"

namespace cgdp::kernels {

namespace {

template <typename T>
__device__ bool greater(T v, int64_t i, T w, int64_t j) {
  return v > w || (v == w && i > j);
}

template <typename T>
__global__ void argmax_kernel(const T* x, ArgMaxGeometry g, T* y) {
  CGDP_KERNEL_LOOP(i, g.rows) {
    T last_v = 0;
    int64_t last_i = -1;  // none picked yet
    for (int64_t j = 0; j < g.top_k; ++j) {
      T best_v = 0;
      int64_t best_i = -1;
      for (int64_t d = 0; d < g.dim; ++d) {
        const T v = x[(i / g.stride * g.dim + d) * g.stride + i % g.stride];
        if (last_i >= 0 && !greater(last_v, last_i, v, d)) continue;  // already picked, or above it
        if (best_i < 0 || greater(v, d, best_v, best_i)) best_v = v, best_i = d;
      }
      last_v = best_v, last_i = best_i;
      const int64_t along = (i / g.stride * g.top_k + j) * g.stride + i % g.stride;
      if (!g.has_axis && g.out_max_val) {
        y[2 * i * g.top_k + j] = static_cast<T>(best_i);
        y[2 * i * g.top_k + g.top_k + j] = best_v;
      } else {
        y[along] = g.out_max_val ? best_v : static_cast<T>(best_i);
      }
    }
  }
}

}  // namespace

template <typename T>
void argmax_forward(const T* x, const ArgMaxGeometry& g, T* y, cudaStream_t stream) {
  if (g.rows <= 0) return;
  argmax_kernel<<<blocks_for(g.rows), kThreads, 0, stream>>>(x, g, y);
  CUDA_CHECK_LAUNCH();
}

template void argmax_forward<float>(const float*, const ArgMaxGeometry&, float*, cudaStream_t);
template void argmax_forward<double>(const double*, const ArgMaxGeometry&, double*, cudaStream_t);

}  // namespace cgdp::kernels
