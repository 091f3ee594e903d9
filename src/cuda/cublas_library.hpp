// cuBLAS, opened on first use instead of linked: loading it (its libcublasLt) runs about 0.3 s of
// static initialisers, which every process paid at start (each test case, `cgdp --help`, every
// scale-out worker) while only CUDA workers multiply on it.
#pragma once

#include <cublas_v2.h>

namespace cgdp::cublas {

// cublasGemmEx with cublasComputeType_t (the header overloads it for the older cudaDataType).
using GemmEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int,
                                  int, const void*, const void*, cudaDataType, int, const void*,
                                  cudaDataType, int, const void*, void*, cudaDataType, int,
                                  cublasComputeType_t, cublasGemmAlgo_t);

// The entry points cgdp calls (cublas_v2.h's names: cublasCreate is cublasCreate_v2).
struct Library {
  decltype(&cublasCreate) create;
  decltype(&cublasDestroy) destroy;
  decltype(&cublasSetStream) set_stream;
  decltype(&cublasSetMathMode) set_math_mode;
  decltype(&cublasGetStatusString) status_string;
  decltype(&cublasSgemm) sgemm;
  decltype(&cublasDgemm) dgemm;
  GemmEx gemm_ex;
  decltype(&cublasSgemv) sgemv;
  decltype(&cublasDgemv) dgemv;
};

// Opens libcublas on the first call (by its soname, then the toolkit's copy the build found) and
// resolves every entry point; throws DeviceError naming the file and what failed, and tries again
// on the next call.
const Library& library();

// Defined only where a process links a cuBLAS of its own (the tests' CPU emulation of the GPU,
// tests/device_emulation/); library() then returns it and opens nothing.
[[gnu::weak]] const Library* linked_library();

}  // namespace cgdp::cublas
