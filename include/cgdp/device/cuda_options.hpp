// Process-wide settings of the CUDA backend's libraries: TF32 in convolutions, and how cuDNN may
// choose convolution algorithms. Set once before nets are built (the trainer does, from flags);
// the CPU backend ignores them.
#pragma once

#include <cstddef>

namespace cgdp {

struct CudaOptions {
  // Let fp32 convolutions use TF32 tensor cores (PyTorch's default for cuDNN). Off: FMA-only
  // kernels, exact fp32 arithmetic. cuBLAS (InnerProduct) never uses TF32, as in PyTorch.
  bool tf32 = false;
  // The most device scratch one convolution algorithm may use.
  size_t workspace_limit_bytes = size_t{1} << 30;
  // Only cuDNN algorithms that give the same bits on every run (no atomics): resumed and
  // single-worker runs reproduce exactly. Off: cuDNN's fastest, whatever it is.
  bool deterministic = true;

  bool operator==(const CudaOptions&) const = default;
};

const CudaOptions& cuda_options();
void set_cuda_options(const CudaOptions& options);

}  // namespace cgdp
