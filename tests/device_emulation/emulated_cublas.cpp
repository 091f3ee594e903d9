// An emulation of the cuBLAS calls cgdp makes (src/cuda/cublas_library.hpp's entry points), for
// tests without a GPU: column-major GEMM and GEMV summed in double, rounded once to the output's
// type. Each call checks its arguments when issued and returns its status then; its computation is
// queued on the handle's stream (emulated_device.hpp), as a kernel is. It checks what a GPU would
// trip on: every operand inside one device allocation the handle's GPU can reach, leading
// dimensions at least the rows they hold, and the types cgdp asks for (16-bit A and B with an fp32
// C and fp32 compute; anything else is refused as NOT_SUPPORTED). With beta = 0 the old C is never
// read, as cuBLAS documents.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "cuda/cublas_library.hpp"
#include "emulated_device.hpp"

namespace emu = cgdp_device_emulation;

struct cublasContext {
  int device;
  cudaStream_t stream;  // where its computations run, in issue order
};

namespace {

// A column-major operand as cuBLAS reads it: op(M) is rows x cols.
struct Operand {
  const void* data;
  cudaDataType type;
  bool transposed;
  int rows, cols, ld;

  // The stored matrix's rows and columns (before op) and its span in bytes.
  int stored_rows() const { return transposed ? cols : rows; }
  int stored_cols() const { return transposed ? rows : cols; }
  size_t bytes() const {
    if (rows == 0 || cols == 0) return 0;
    return (static_cast<size_t>(ld) * (stored_cols() - 1) + stored_rows()) * element_bytes(type);
  }
  double at(int i, int j) const {
    const size_t k = transposed ? static_cast<size_t>(i) * ld + j : static_cast<size_t>(j) * ld + i;
    return load(data, k, type);
  }

  static size_t element_bytes(cudaDataType t) {
    return t == CUDA_R_64F ? 8 : t == CUDA_R_32F ? 4 : 2;
  }
  static double load(const void* p, size_t k, cudaDataType t) {
    switch (t) {
      case CUDA_R_64F:
        return static_cast<const double*>(p)[k];
      case CUDA_R_32F:
        return static_cast<const float*>(p)[k];
      case CUDA_R_16BF:
        return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[k]);
      default:
        return __half2float(static_cast<const __half*>(p)[k]);
    }
  }
};

void store(void* p, size_t k, cudaDataType t, double v) {
  if (t == CUDA_R_64F)
    static_cast<double*>(p)[k] = v;
  else
    static_cast<float*>(p)[k] = static_cast<float>(v);
}

cublasStatus_t refuse(cublasStatus_t status, const std::string& why) {
  emu::report(why);
  return status;
}

// Checks an operand's leading dimension and that its bytes lie where the handle's GPU reaches.
cublasStatus_t check(const Operand& m, cublasHandle_t h, const std::string& what) {
  if (m.ld < (m.stored_rows() > 1 ? m.stored_rows() : 1))
    return refuse(CUBLAS_STATUS_INVALID_VALUE, what + ": leading dimension " +
                                                   std::to_string(m.ld) + " below its " +
                                                   std::to_string(m.stored_rows()) + " rows");
  if (m.bytes() > 0 && !emu::device_range(m.data, m.bytes(), h->device, what))
    return CUBLAS_STATUS_INVALID_VALUE;
  return CUBLAS_STATUS_SUCCESS;
}

// Queues a checked call's computation on the handle's stream, after the work issued there before,
// as a kernel is. It runs after the call returned: `work` holds copies of all it reads but device
// memory (scalars' values, operands' shapes, pointers).
template <typename F>
cublasStatus_t run_on(cublasHandle_t h, F work) {
  emu::enqueue(h->stream, std::move(work));
  emu::clear_problem();
  return CUBLAS_STATUS_SUCCESS;
}

// op(M) in double, each row contiguous (or, `by_column`, each column): the GEMM's inner loop.
std::vector<double> widened(const Operand& m, bool by_column) {
  std::vector<double> out(static_cast<size_t>(m.rows) * m.cols);
  for (int i = 0; i < m.rows; ++i)
    for (int j = 0; j < m.cols; ++j)
      out[by_column ? static_cast<size_t>(j) * m.rows + i : static_cast<size_t>(i) * m.cols + j] =
          m.at(i, j);
  return out;
}

// C = alpha op(A) op(B) + beta C over checked operands, `c` being out's data.
void multiply(double alpha, const Operand& a, const Operand& b, double beta, const Operand& out,
              void* c) {
  const int m = out.rows, n = out.cols, k = a.cols;
  const std::vector<double> rows_of_a = widened(a, false), columns_of_b = widened(b, true);
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < m; ++i) {
      const double* ai = rows_of_a.data() + static_cast<size_t>(i) * k;
      const double* bj = columns_of_b.data() + static_cast<size_t>(j) * k;
      double sum = 0;
      for (int p = 0; p < k; ++p) sum += ai[p] * bj[p];
      const size_t at = static_cast<size_t>(j) * out.ld + i;
      store(c, at, out.type, alpha * sum + (beta == 0 ? 0 : beta * out.at(i, j)));
    }
}

// C = alpha op(A) op(B) + beta C, column-major, sums in double.
cublasStatus_t gemm(cublasHandle_t h, const char* call, cublasOperation_t ta, cublasOperation_t tb,
                    int m, int n, int k, double alpha, const Operand& a_in, const Operand& b_in,
                    double beta, void* c, cudaDataType c_type, int ldc) {
  if (m < 0 || n < 0 || k < 0)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, std::string(call) + ": negative size");
  const Operand a{a_in.data, a_in.type, ta != CUBLAS_OP_N, m, k, a_in.ld};
  const Operand b{b_in.data, b_in.type, tb != CUBLAS_OP_N, k, n, b_in.ld};
  const Operand out{c, c_type, false, m, n, ldc};
  if (k > 0) {
    if (cublasStatus_t s = check(a, h, std::string(call) + ": A"); s) return s;
    if (cublasStatus_t s = check(b, h, std::string(call) + ": B"); s) return s;
  }
  if (cublasStatus_t s = check(out, h, std::string(call) + ": C"); s) return s;
  return run_on(h, [alpha, a, b, beta, out, c] { multiply(alpha, a, b, beta, out, c); });
}

// y = alpha op(A) x + beta y over checked operands, `y` being vy's data.
void multiply_vector(double alpha, const Operand& a, const Operand& vx, double beta,
                     const Operand& vy, void* y) {
  for (int i = 0; i < a.rows; ++i) {
    double sum = 0;
    for (int p = 0; p < a.cols; ++p) sum += a.at(i, p) * vx.at(p, 0);
    store(y, i, vy.type, alpha * sum + (beta == 0 ? 0 : beta * vy.at(i, 0)));
  }
}

// y = alpha op(A) x + beta y, A column-major m x n, unit strides.
cublasStatus_t gemv(cublasHandle_t h, const char* call, cublasOperation_t trans, int m, int n,
                    double alpha, const void* a_data, int lda, const void* x, int incx, double beta,
                    void* y, int incy, cudaDataType type) {
  if (incx != 1 || incy != 1)
    return refuse(CUBLAS_STATUS_NOT_SUPPORTED, std::string(call) + ": strides other than 1");
  const bool t = trans != CUBLAS_OP_N;
  const int rows = t ? n : m, inner = t ? m : n;
  const Operand a{a_data, type, t, rows, inner, lda};
  const Operand vx{x, type, false, inner, 1, inner > 0 ? inner : 1};
  const Operand vy{y, type, false, rows, 1, rows > 0 ? rows : 1};
  if (cublasStatus_t s = check(a, h, std::string(call) + ": A"); s) return s;
  if (cublasStatus_t s = check(vx, h, std::string(call) + ": x"); s) return s;
  if (cublasStatus_t s = check(vy, h, std::string(call) + ": y"); s) return s;
  return run_on(h, [alpha, a, vx, beta, vy, y] { multiply_vector(alpha, a, vx, beta, vy, y); });
}

cublasStatus_t create(cublasHandle_t* h) {
  *h = new cublasContext{emu::current_device(), nullptr};
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t destroy(cublasHandle_t h) {
  delete h;
  return CUBLAS_STATUS_SUCCESS;
}

// A handle's computations run on its stream, on that stream's GPU.
cublasStatus_t set_stream(cublasHandle_t h, cudaStream_t stream) {
  h->device = emu::device_of(stream);
  h->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t set_math_mode(cublasHandle_t, cublasMath_t) {
  return CUBLAS_STATUS_SUCCESS;
}

const char* status_string(cublasStatus_t status) {
  thread_local std::string text;
  text = status == CUBLAS_STATUS_SUCCESS         ? "CUBLAS_STATUS_SUCCESS"
         : status == CUBLAS_STATUS_INVALID_VALUE ? "CUBLAS_STATUS_INVALID_VALUE"
         : status == CUBLAS_STATUS_NOT_SUPPORTED ? "CUBLAS_STATUS_NOT_SUPPORTED"
                                                 : "CUBLAS_STATUS_INTERNAL_ERROR";
  if (!emu::problem().empty()) text += " (" + emu::problem() + ")";
  return text.c_str();
}

cublasStatus_t sgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                     int k, const float* alpha, const float* a, int lda, const float* b, int ldb,
                     const float* beta, float* c, int ldc) {
  return gemm(h, "cublasSgemm", ta, tb, m, n, k, *alpha, {a, CUDA_R_32F, false, 0, 0, lda},
              {b, CUDA_R_32F, false, 0, 0, ldb}, *beta, c, CUDA_R_32F, ldc);
}

cublasStatus_t dgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                     int k, const double* alpha, const double* a, int lda, const double* b, int ldb,
                     const double* beta, double* c, int ldc) {
  return gemm(h, "cublasDgemm", ta, tb, m, n, k, *alpha, {a, CUDA_R_64F, false, 0, 0, lda},
              {b, CUDA_R_64F, false, 0, 0, ldb}, *beta, c, CUDA_R_64F, ldc);
}

bool sixteen_bits(cudaDataType t) {
  return t == CUDA_R_16BF || t == CUDA_R_16F;
}

// What cgdp asks of cublasGemmEx: 16-bit (or fp32) A and B of one type, fp32 C and compute.
cublasStatus_t gemm_ex(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                       int k, const void* alpha, const void* a, cudaDataType a_type, int lda,
                       const void* b, cudaDataType b_type, int ldb, const void* beta, void* c,
                       cudaDataType c_type, int ldc, cublasComputeType_t compute,
                       cublasGemmAlgo_t) {
  if (a_type != b_type || !(sixteen_bits(a_type) || a_type == CUDA_R_32F) || c_type != CUDA_R_32F ||
      compute != CUBLAS_COMPUTE_32F)
    return refuse(CUBLAS_STATUS_NOT_SUPPORTED,
                  "cublasGemmEx: only 16-bit or fp32 A and B with an fp32 C and fp32 compute");
  return gemm(h, "cublasGemmEx", ta, tb, m, n, k, *static_cast<const float*>(alpha),
              {a, a_type, false, 0, 0, lda}, {b, b_type, false, 0, 0, ldb},
              *static_cast<const float*>(beta), c, c_type, ldc);
}

cublasStatus_t sgemv(cublasHandle_t h, cublasOperation_t trans, int m, int n, const float* alpha,
                     const float* a, int lda, const float* x, int incx, const float* beta, float* y,
                     int incy) {
  return gemv(h, "cublasSgemv", trans, m, n, *alpha, a, lda, x, incx, *beta, y, incy, CUDA_R_32F);
}

cublasStatus_t dgemv(cublasHandle_t h, cublasOperation_t trans, int m, int n, const double* alpha,
                     const double* a, int lda, const double* x, int incx, const double* beta,
                     double* y, int incy) {
  return gemv(h, "cublasDgemv", trans, m, n, *alpha, a, lda, x, incx, *beta, y, incy, CUDA_R_64F);
}

}  // namespace

namespace cgdp::cublas {

const Library* linked_library() {
  static const Library lib{create, destroy, set_stream, set_math_mode, status_string,
                           sgemm,  dgemm,   gemm_ex,    sgemv,         dgemv};
  return &lib;
}

}  // namespace cgdp::cublas
