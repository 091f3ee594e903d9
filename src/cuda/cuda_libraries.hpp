// The cuDNN and cuBLAS handles of one CUDA stream (created on first use and bound to it), the
// scratch shared by the layers that run on it, and CUDNN_CHECK / CUBLAS_CHECK.
#pragma once

#include <cublas_v2.h>
#include <cudnn.h>

#include <cstddef>

#include "cgdp/device/device.hpp"
#include "cublas_library.hpp"
#include "cuda_check.hpp"

#define CUDNN_CHECK(call)                                                                     \
  do {                                                                                        \
    const cudnnStatus_t cgdp_status_ = (call);                                                \
    if (cgdp_status_ != CUDNN_STATUS_SUCCESS)                                                 \
      ::cgdp::throw_cuda_error(#call, cudnnGetErrorString(cgdp_status_), __FILE__, __LINE__); \
  } while (0)

#define CUBLAS_CHECK(call)                                                                   \
  do {                                                                                       \
    const cublasStatus_t cgdp_status_ = (call);                                              \
    if (cgdp_status_ != CUBLAS_STATUS_SUCCESS)                                               \
      ::cgdp::throw_cuda_error(#call, ::cgdp::cublas::library().status_string(cgdp_status_), \
                               __FILE__, __LINE__);                                          \
  } while (0)

namespace cgdp {

// The layers on one stream run one at a time, so they share one handle of each library (set to
// that stream, default math: cuBLAS never uses TF32; cuDNN's math is chosen per convolution) and
// one scratch buffer. All three throw DeviceError if `stream` is not a CUDA stream.
cudnnHandle_t cudnn_handle(Stream& stream);
cublasHandle_t cublas_handle(Stream& stream);
// At least `bytes` of device memory for cuDNN's scratch, counted on the stream's device. Growing
// first waits for the stream's queued work (which may use the old buffer); that happens only when
// a layer first runs a shape that needs more.
void* stream_workspace(Stream& stream, size_t bytes);
// The same rules for a second buffer: the 16-bit copies of a multiplying layer's operands
// (cuda/half_operands.hpp), in use while cuDNN's scratch is.
void* stream_half_operands(Stream& stream, size_t bytes);

}  // namespace cgdp
