// Crop on the GPU, the twin of src/layers/crop_layer.cpp: one thread per top element.
#include "crop.cuh"
#include "launch.cuh"

namespace cgdp::kernels {

namespace {

__device__ int64_t source_index(int64_t i, const CropGeometry& g) {
  int64_t index = 0, stride = 1;
  for (int a = g.axes - 1; a >= 0; --a) {
    index += (i % g.top[a] + g.offset[a]) * stride;
    i /= g.top[a];
    stride *= g.in[a];
  }
  return index;
}

template <typename T>
__global__ void forward_kernel(const T* x, CropGeometry g, int64_t n, T* y) {
  CGDP_KERNEL_LOOP(i, n) { y[i] = x[source_index(i, g)]; }
}

template <typename T>
__global__ void backward_kernel(const T* dy, CropGeometry g, int64_t n, T* dx) {
  CGDP_KERNEL_LOOP(i, n) { dx[source_index(i, g)] = dy[i]; }
}

}  // namespace

template <typename T>
void crop_forward(const T* x, const CropGeometry& g, int64_t top_count, T* y, cudaStream_t stream) {
  if (top_count <= 0) return;
  forward_kernel<<<blocks_for(top_count), kThreads, 0, stream>>>(x, g, top_count, y);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void crop_backward(const T* dy, const CropGeometry& g, int64_t top_count, int64_t in_count, T* dx, cudaStream_t stream) {
  if (in_count <= 0) return;
  CUDA_CHECK(cudaMemsetAsync(dx, 0, static_cast<size_t>(in_count) * sizeof(T), stream));
  if (top_count <= 0) return;
  backward_kernel<<<blocks_for(top_count), kThreads, 0, stream>>>(dy, g, top_count, dx);
  CUDA_CHECK_LAUNCH();
}

template void crop_forward<float>(const float*, const CropGeometry&, int64_t, float*, cudaStream_t);
template void crop_forward<double>(const double*, const CropGeometry&, int64_t, double*, cudaStream_t);
template void crop_backward<float>(const float*, const CropGeometry&, int64_t, int64_t, float*, cudaStream_t);
template void crop_backward<double>(const double*, const CropGeometry&, int64_t, int64_t, double*, cudaStream_t);

}  // namespace cgdp::kernels
