// The error path of CUDA_CHECK, CUDNN_CHECK and CUBLAS_CHECK: one message format for all three.
#include "cuda_check.hpp"

#include "cgdp/core/error.hpp"

namespace cgdp {

void throw_cuda_error(const char* call, const char* what, const char* file, int line) {
  int device = -1;
  const bool known = cudaGetDevice(&device) == cudaSuccess;
  throw DeviceError(cat("cuda:", known ? std::to_string(device) : std::string("?"), ": ", call,
                        " failed: ", what, " (", file, ":", line, ")"));
}

}  // namespace cgdp
