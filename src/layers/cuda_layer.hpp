// What the CUDA halves of the layers (src/layers/*_cuda.cpp) share: the stream a call runs on,
// int sizes for cuDNN/cuBLAS, device scratch that grows with the shapes, and a packed 4-D tensor
// descriptor.
#pragma once

#include "cgdp/layers/layer.hpp"
#include "cgdp/layers/layer_errors.hpp"
#include "cuda/cuda_libraries.hpp"
#include "cuda/cuda_stream.hpp"
#include "cuda/cudnn_descriptors.hpp"

namespace cgdp {

// The compute stream of a CUDA layer call (kernels go there); DeviceError if the caller gave none.
template <typename T>
Stream& layer_stream(const Layer<T>& layer, const RunContext& ctx) {
  if (!ctx.stream)
    throw_layer_error<DeviceError>(layer, "runs on CUDA and needs a stream (RunContext::stream)");
  return *ctx.stream;
}

// `value` as the int cuDNN and cuBLAS take; DeviceError naming the layer when it does not fit.
template <typename T>
int as_int(const Layer<T>& layer, int64_t value, const char* what) {
  if (value < 0 || value > INT32_MAX)
    throw_layer_error<DeviceError>(layer, cat(what, " ", value, " is beyond what cuDNN/cuBLAS take"));
  return static_cast<int>(value);
}

// At least `count` elements of V in `buffer` on `device`. Growing waits for `stream` first: work
// queued there may still use the old memory.
template <typename V>
V* ensure_buffer(DeviceBuffer& buffer, Device& device, Stream& stream, int64_t count) {
  const size_t bytes = static_cast<size_t>(count) * sizeof(V);
  if (buffer.bytes() < bytes) {
    if (buffer.get()) stream.synchronize();
    buffer.reset();
    buffer = DeviceBuffer(device, bytes);
  }
  return static_cast<V*>(buffer.get());
}

// Copies `rows` rows of `width` elements between pitches (in elements), device to device, in
// stream order: a slab of a blob along an axis (Concat, Slice).
template <typename T>
void copy_rows(Stream& stream, T* dst, int64_t dst_pitch, const T* src, int64_t src_pitch, int64_t width,
               int64_t rows) {
  if (width == 0 || rows == 0) return;
  CUDA_CHECK(cudaMemcpy2DAsync(dst, dst_pitch * sizeof(T), src, src_pitch * sizeof(T), width * sizeof(T), rows,
                               cudaMemcpyDeviceToDevice, native_stream(stream)));
}

// A fully packed `n` x `c` x `h` x `w` tensor of `type` (T's by default), NCHW unless `format`
// says NHWC.
template <typename T>
void set_tensor(const Layer<T>& layer, TensorDescriptor& desc, int64_t n, int64_t c, int64_t h,
                int64_t w, cudnnDataType_t type = cudnn_data_type<T>(),
                cudnnTensorFormat_t format = CUDNN_TENSOR_NCHW) {
  CUDNN_CHECK(cudnnSetTensor4dDescriptor(
      desc.get(), format, type, as_int(layer, n, "dimension"), as_int(layer, c, "dimension"),
      as_int(layer, h, "dimension"), as_int(layer, w, "dimension")));
}

}  // namespace cgdp

// A layer's CUDA members for float and double. The class itself is instantiated by its CPU .cpp;
// these instantiate only the members defined in the *_cuda.cpp.
#define CGDP_INSTANTIATE_CUDA_FORWARD(LayerClass)                                          \
  template void LayerClass<float>::forward_cuda(const RunContext&, const BlobVec<float>&,  \
                                                const BlobVec<float>&);                    \
  template void LayerClass<double>::forward_cuda(const RunContext&, const BlobVec<double>&, \
                                                 const BlobVec<double>&);
#define CGDP_INSTANTIATE_CUDA_LAYER(LayerClass)                                                 \
  CGDP_INSTANTIATE_CUDA_FORWARD(LayerClass)                                                     \
  template void LayerClass<float>::backward_cuda(const RunContext&, const BlobVec<float>&,      \
                                                 const std::vector<bool>&, const BlobVec<float>&); \
  template void LayerClass<double>::backward_cuda(const RunContext&, const BlobVec<double>&,    \
                                                  const std::vector<bool>&,                     \
                                                  const BlobVec<double>&);
