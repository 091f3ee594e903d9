// InnerProduct on CUDA: the CPU layer's three GEMMs and bias GEMV through cuBLAS (row-major via
// the transposition trick, cublas_gemm.hpp); the bias is added as ones(M) x bias, as in Caffe.
// Staged factors are copied device to device on the compute stream; the rebuild is one GEMM on
// the stream it is given. In bf16/fp16 the GEMMs multiply 16-bit copies (cuda/half_operands.hpp).
#include <type_traits>

#include "cgdp/layers/inner_product_layer.hpp"
#include "cuda/cublas_gemm.hpp"
#include "cuda/half_operands.hpp"
#include "cuda_layer.hpp"
#include "sum.cuh"

namespace cgdp {

namespace {

struct InnerProductCuda final : LayerBackendState {
  DeviceBuffer ones;  // a column of `rows` ones
  int64_t rows = 0;
};

// The ones column for `rows` rows, filled in stream order when it grows.
template <typename T>
const T* ones(InnerProductCuda& s, Device& device, Stream& stream, int64_t rows) {
  T* p = ensure_buffer<T>(s.ones, device, stream, rows);
  if (s.rows < rows) {
    kernels::fill(p, rows, T(1), native_stream(stream));
    s.rows = rows;
  }
  return p;
}

// out [M x N] = in [M x K] * op(W): fp32 or fp64, or in bf16/fp16 one GEMM of 16-bit copies with
// fp32 sums.
template <typename T>
void multiply(cublasHandle_t h, Stream& stream, bool trans_w, int m, int n, int k,
              const Blob<T>& in, const Blob<T>& weights, T* out) {
  if constexpr (std::is_same_v<T, float>) {
    if (multiplies_in_half<T>()) {
      const HalfOperands o = half_operands(stream, in.count(), 0, weights.count());
      cublas::gemm_half(h, cuda_half_type(layer_precision()), false, trans_w, m, n, k, 1.f,
                        narrow_operand(stream, in.data(), o.input, in.count()),
                        narrow_operand(stream, weights.data(), o.weights, weights.count()), 0.f,
                        out);
      return;
    }
  }
  cublas::gemm(h, false, trans_w, m, n, k, T(1), in.data(), weights.data(), T(0), out);
}

}  // namespace

template <typename T>
void InnerProductLayer<T>::forward_cuda(const RunContext& ctx, const BlobVec<T>& bottom,
                                        const BlobVec<T>& top) {
  Stream& stream = layer_stream(*this, ctx);
  const int m = as_int(*this, rows_, "rows"), n = as_int(*this, num_output_, "num_output"),
            k = as_int(*this, inputs_, "inputs");
  if (m == 0) return;
  const cublasHandle_t h = cublas_handle(stream);
  T* out = top[0]->mutable_data();
  multiply(h, stream, !transpose_, m, n, k, *bottom[0], *this->params_[0], out);
  if (!bias_term_) return;
  auto& s = this->template backend_state<InnerProductCuda>();
  cublas::gemm(h, false, false, m, n, 1, T(1), ones<T>(s, this->device(), stream, rows_),
               this->params_[1]->data(), T(1), out);
}

template <typename T>
void InnerProductLayer<T>::backward_cuda(const RunContext& ctx, const BlobVec<T>& top,
                                         const std::vector<bool>& propagate_down,
                                         const BlobVec<T>& bottom) {
  Stream& stream = layer_stream(*this, ctx);
  const int m = as_int(*this, rows_, "rows"), n = as_int(*this, num_output_, "num_output"),
            k = as_int(*this, inputs_, "inputs");
  if (m == 0) return;
  const cublasHandle_t h = cublas_handle(stream);
  if (bias_term_) {  // from the fp32 output gradient
    auto& s = this->template backend_state<InnerProductCuda>();
    cublas::gemv(h, true, m, n, T(1), top[0]->diff(), ones<T>(s, this->device(), stream, rows_),
                 T(1), this->params_[1]->mutable_diff());
  }
  if constexpr (std::is_same_v<T, float>)
    if (multiplies_in_half<T>()) return backward_half_cuda(ctx, top, propagate_down, bottom);
  const T* out_diff = top[0]->diff();
  const T* in = bottom[0]->data();
  T* weight_diff = this->params_[0]->mutable_diff();
  if (staged_out_rows_) {
    const FactorShape f = factor_shape();
    stream.copy_async(staged_out_rows_ + ctx.micro_batch * f.out_elements(), out_diff,
                      f.out_elements() * sizeof(T));
    stream.copy_async(staged_in_rows_ + ctx.micro_batch * f.in_elements(), in,
                      f.in_elements() * sizeof(T));
  } else if (transpose_) {  // W [K x N] += in^T [K x M] * out_diff [M x N]
    cublas::gemm(h, true, false, k, n, m, T(1), in, out_diff, T(1), weight_diff);
  } else {  // W [N x K] += out_diff^T [N x M] * in [M x K]
    cublas::gemm(h, true, false, n, k, m, T(1), out_diff, in, T(1), weight_diff);
  }
  if (propagate_down[0])
    cublas::gemm(h, false, transpose_, m, k, n, T(1), out_diff, this->params_[0]->data(), T(0),
                 bottom[0]->mutable_diff());
}

// The weight and input gradients from 16-bit copies of the input, the output gradient and the
// weights (fp32 sums into the fp32 gradients); staged factors are the copies' values, as the CPU
// backend stages them.
template <typename T>
void InnerProductLayer<T>::backward_half_cuda(const RunContext& ctx, const BlobVec<T>& top,
                                              const std::vector<bool>& propagate_down,
                                              const BlobVec<T>& bottom) {
  if constexpr (std::is_same_v<T, float>) {
    Stream& stream = layer_stream(*this, ctx);
    const int m = as_int(*this, rows_, "rows"), n = as_int(*this, num_output_, "num_output"),
              k = as_int(*this, inputs_, "inputs");
    const cublasHandle_t h = cublas_handle(stream);
    const cudaDataType_t type = cuda_half_type(layer_precision());
    const int64_t inputs = bottom[0]->count(), outputs = top[0]->count(),
                  weights = this->params_[0]->count();
    if (staged_out_rows_) {
      const FactorShape f = factor_shape();
      round_operand(stream, top[0]->diff(), staged_out_rows_ + ctx.micro_batch * f.out_elements(),
                    f.out_elements());
      round_operand(stream, bottom[0]->data(), staged_in_rows_ + ctx.micro_batch * f.in_elements(),
                    f.in_elements());
    }
    const HalfOperands o = half_operands(stream, inputs, outputs, weights);
    const uint16_t* out_diff = narrow_operand(stream, top[0]->diff(), o.output, outputs);
    if (!staged_out_rows_) {
      const uint16_t* in = narrow_operand(stream, bottom[0]->data(), o.input, inputs);
      float* weight_diff = this->params_[0]->mutable_diff();
      if (transpose_)  // W [K x N] += in^T [K x M] * out_diff [M x N]
        cublas::gemm_half(h, type, true, false, k, n, m, 1.f, in, out_diff, 1.f, weight_diff);
      else  // W [N x K] += out_diff^T [N x M] * in [M x K]
        cublas::gemm_half(h, type, true, false, n, k, m, 1.f, out_diff, in, 1.f, weight_diff);
    }
    if (propagate_down[0])
      cublas::gemm_half(h, type, false, transpose_, m, k, n, 1.f, out_diff,
                        narrow_operand(stream, this->params_[0]->data(), o.weights, weights), 0.f,
                        bottom[0]->mutable_diff());
  }
}

template <typename T>
void InnerProductLayer<T>::rebuild_weight_diff_cuda(const RunContext& ctx, const T* out_rows,
                                                    const T* in_rows, int64_t rows) {
  Stream& stream = layer_stream(*this, ctx);
  const int r = as_int(*this, rows, "factor rows"), n = as_int(*this, num_output_, "num_output"),
            k = as_int(*this, inputs_, "inputs");
  const cublasHandle_t h = cublas_handle(stream);
  T* weight_diff = this->params_[0]->mutable_diff();
  if (transpose_) {  // W [K x N] = in^T [K x R] * out [R x N]
    cublas::gemm(h, true, false, k, n, r, T(1), in_rows, out_rows, T(0), weight_diff);
  } else {  // W [N x K] = out^T [N x R] * in [R x K]
    cublas::gemm(h, true, false, n, k, r, T(1), out_rows, in_rows, T(0), weight_diff);
  }
}

template <typename T>
void InnerProductLayer<T>::rebuild_weight_diff_bf16_cuda(const RunContext& ctx,
                                                         const uint16_t* out_rows,
                                                         const uint16_t* in_rows, int64_t rows) {
  if constexpr (std::is_same_v<T, float>) {
    Stream& stream = layer_stream(*this, ctx);
    const int r = as_int(*this, rows, "factor rows"), n = as_int(*this, num_output_, "num_output"),
              k = as_int(*this, inputs_, "inputs");
    const cublasHandle_t h = cublas_handle(stream);
    float* weight_diff = this->params_[0]->mutable_diff();
    if (transpose_)  // W [K x N] = in^T [K x R] * out [R x N]
      cublas::gemm_half(h, CUDA_R_16BF, true, false, k, n, r, 1.f, in_rows, out_rows, 0.f,
                        weight_diff);
    else  // W [N x K] = out^T [N x R] * in [R x K]
      cublas::gemm_half(h, CUDA_R_16BF, true, false, n, k, r, 1.f, out_rows, in_rows, 0.f,
                        weight_diff);
  } else {
    CGDP_ASSERT(false && "bf16 rebuilds are for fp32 layers");
  }
}

CGDP_INSTANTIATE_CUDA_LAYER(InnerProductLayer)
template void InnerProductLayer<float>::backward_half_cuda(const RunContext&, const BlobVec<float>&,
                                                           const std::vector<bool>&,
                                                           const BlobVec<float>&);
template void InnerProductLayer<double>::backward_half_cuda(const RunContext&,
                                                            const BlobVec<double>&,
                                                            const std::vector<bool>&,
                                                            const BlobVec<double>&);
template void InnerProductLayer<float>::rebuild_weight_diff_bf16_cuda(const RunContext&,
                                                                      const uint16_t*,
                                                                      const uint16_t*, int64_t);
template void InnerProductLayer<double>::rebuild_weight_diff_bf16_cuda(const RunContext&,
                                                                       const uint16_t*,
                                                                       const uint16_t*, int64_t);
template void InnerProductLayer<float>::rebuild_weight_diff_cuda(const RunContext&, const float*,
                                                                 const float*, int64_t);
template void InnerProductLayer<double>::rebuild_weight_diff_cuda(const RunContext&,
                                                                  const double*, const double*,
                                                                  int64_t);

}  // namespace cgdp
