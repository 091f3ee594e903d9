// Row-major GEMM and GEMV through column-major cuBLAS, with the signatures of layers/blas.hpp:
// a row-major matrix is its transpose in column-major, so C = op(A) op(B) is computed as
// C^T = op(B)^T op(A)^T (Caffe's caffe_gpu_gemm).
#pragma once

#include <cstdint>

#include "cuda_libraries.hpp"

namespace cgdp::cublas {

inline cublasOperation_t op(bool trans) { return trans ? CUBLAS_OP_T : CUBLAS_OP_N; }

// C[M x N] = alpha * op(A)[M x K] * op(B)[K x N] + beta * C, all row-major, sizes within int.
inline void gemm(cublasHandle_t h, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                 const float* a, const float* b, float beta, float* c) {
  CUBLAS_CHECK(library().sgemm(h, op(trans_b), op(trans_a), n, m, k, &alpha, b, trans_b ? k : n, a,
                               trans_a ? m : k, &beta, c, n));
}
inline void gemm(cublasHandle_t h, bool trans_a, bool trans_b, int m, int n, int k, double alpha,
                 const double* a, const double* b, double beta, double* c) {
  CUBLAS_CHECK(library().dgemm(h, op(trans_b), op(trans_a), n, m, k, &alpha, b, trans_b ? k : n, a,
                               trans_a ? m : k, &beta, c, n));
}

// The same with 16-bit A and B (raw bits of `type`: CUDA_R_16BF or CUDA_R_16F) and an fp32 C,
// on the tensor cores: each product of two 16-bit numbers is exact in fp32, and the sums
// accumulate in fp32.
inline void gemm_half(cublasHandle_t h, cudaDataType_t type, bool trans_a, bool trans_b, int m,
                      int n, int k, float alpha, const uint16_t* a, const uint16_t* b, float beta,
                      float* c) {
  CUBLAS_CHECK(library().gemm_ex(h, op(trans_b), op(trans_a), n, m, k, &alpha, b, type,
                                 trans_b ? k : n, a, type, trans_a ? m : k, &beta, c, CUDA_R_32F, n,
                                 CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

// y = alpha * op(A)[M x N] * x + beta * y, A row-major.
inline void gemv(cublasHandle_t h, bool trans_a, int m, int n, float alpha, const float* a,
                 const float* x, float beta, float* y) {
  CUBLAS_CHECK(library().sgemv(h, op(!trans_a), n, m, &alpha, a, n, x, 1, &beta, y, 1));
}
inline void gemv(cublasHandle_t h, bool trans_a, int m, int n, double alpha, const double* a,
                 const double* x, double beta, double* y) {
  CUBLAS_CHECK(library().dgemv(h, op(!trans_a), n, m, &alpha, a, n, x, 1, &beta, y, 1));
}

}  // namespace cgdp::cublas
