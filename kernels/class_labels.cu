// Label decoding: one thread per label, the first bad position found by atomicMin (the same
// answer whatever the order threads run in).
#include "class_labels.cuh"
#include "launch.cuh"

namespace cgdp::kernels {

namespace {

template <typename T>
__global__ void decode_kernel(const T* labels, int64_t n, int64_t classes, bool has_ignore,
                              int64_t ignore, int64_t* out, LabelError* error) {
  CGDP_KERNEL_LOOP(p, n) {
    const T value = labels[p];
    int64_t label = -1;
    bool bad = true;
    if (isfinite(value) && floor(value) == value) {  // the CPU's class_label() checks, in order
      label = static_cast<int64_t>(value);
      if (has_ignore && label == ignore) {
        label = -1;
        bad = false;
      } else {
        bad = label < 0 || label >= classes;
      }
    }
    if (bad) {
      label = -1;
      atomicMin(&error->position, static_cast<unsigned long long>(p));
    }
    out[p] = label;
  }
}

template <typename T>
__global__ void record_value_kernel(const T* labels, LabelError* error) {
  if (error->position != kNoLabelError) error->value = static_cast<double>(labels[error->position]);
}

}  // namespace

template <typename T>
void decode_labels(const T* labels, const ClassShape& shape, bool has_ignore, int64_t ignore,
                   int64_t* out, LabelError* error, cudaStream_t stream) {
  CUDA_CHECK(cudaMemsetAsync(&error->position, 0xff, sizeof error->position, stream));
  const int64_t n = shape.outer * shape.inner;
  if (n <= 0) return;
  decode_kernel<<<blocks_for(n), kThreads, 0, stream>>>(labels, n, shape.classes, has_ignore,
                                                         ignore, out, error);
  CUDA_CHECK_LAUNCH();
  record_value_kernel<<<1, 1, 0, stream>>>(labels, error);
  CUDA_CHECK_LAUNCH();
}

template void decode_labels<float>(const float*, const ClassShape&, bool, int64_t, int64_t*,
                                   LabelError*, cudaStream_t);
template void decode_labels<double>(const double*, const ClassShape&, bool, int64_t, int64_t*,
                                    LabelError*, cudaStream_t);

}  // namespace cgdp::kernels
