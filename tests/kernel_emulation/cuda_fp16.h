// <cuda_fp16.h> for the kernel emulator: kernels/*.cu compiled by the C++ compiler see
// emulated_cuda.hpp in place of the CUDA toolkit's header.
#pragma once

#include "emulated_cuda.hpp"
