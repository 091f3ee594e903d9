// Thin typed wrappers over OpenBLAS (row-major), so layer code reads as math for float and double.
#pragma once

#include <cblas.h>

#include <cstdint>

namespace cgdp::blas {

// C[M x N] = alpha * op(A)[M x K] * op(B)[K x N] + beta * C, all row-major.
inline void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                 const float* a, const float* b, float beta, float* c) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              m, n, k, alpha, a, trans_a ? m : k, b, trans_b ? k : n, beta, c, n);
}
inline void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
                 const double* a, const double* b, double beta, double* c) {
  cblas_dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              m, n, k, alpha, a, trans_a ? m : k, b, trans_b ? k : n, beta, c, n);
}

// The same with explicit leading dimensions: a block of columns of a larger matrix (a streamed
// weight's slices, inner_product_streamed.cpp). OpenBLAS packs its operands first, so the strides
// change no sum's order.
inline void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                 const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                 int64_t ldc) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
inline void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
                 const double* a, int64_t lda, const double* b, int64_t ldb, double beta, double* c,
                 int64_t ldc) {
  cblas_dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// y = alpha * op(A)[M x N] * x + beta * y
inline void gemv(bool trans_a, int64_t m, int64_t n, float alpha, const float* a, const float* x,
                 float beta, float* y) {
  cblas_sgemv(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, m, n, alpha, a, n, x, 1, beta, y, 1);
}
inline void gemv(bool trans_a, int64_t m, int64_t n, double alpha, const double* a,
                 const double* x, double beta, double* y) {
  cblas_dgemv(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, m, n, alpha, a, n, x, 1, beta, y, 1);
}

// y += alpha * x
inline void axpy(int64_t n, float alpha, const float* x, float* y) { cblas_saxpy(n, alpha, x, 1, y, 1); }
inline void axpy(int64_t n, double alpha, const double* x, double* y) { cblas_daxpy(n, alpha, x, 1, y, 1); }

}  // namespace cgdp::blas
