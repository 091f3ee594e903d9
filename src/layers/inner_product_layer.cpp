// InnerProduct on the CPU: three GEMMs (forward, weight gradient, input gradient), each threaded
// by OpenBLAS and run in slices of the weight (inner_product_slices.cpp; oneDNN's bf16 inner
// products in a bf16 run, onednn_inner_product.cpp), and a GEMV for the bias gradient. With staged
// factors, backward copies its rows of out_diff and in instead of the weight gradient, which one
// GEMM rebuilds later from every worker's rows (sufficient_factors.hpp).
#include "cgdp/layers/inner_product_layer.hpp"

#include <cstring>
#include <type_traits>

#include "cgdp/layers/blas.hpp"
#include "cgdp/layers/filler.hpp"
#include "layers/rounded_operands.hpp"
#ifdef CGDP_HAVE_ONEDNN
#include "layers/onednn_inner_product.hpp"
#endif

namespace cgdp {

template <typename T>
void InnerProductLayer<T>::layer_setup(const BlobVec<T>& bottom, const BlobVec<T>&, Rng& rng) {
  const auto& p = this->param_.inner_product_param();
  if (p.num_output() == 0) this->fail("needs num_output > 0");
  num_output_ = p.num_output();
  bias_term_ = p.bias_term();
  transpose_ = p.transpose();
  const int axes = bottom[0]->num_axes();
  if (p.axis() < -axes || p.axis() >= axes)
    this->fail(cat("axis ", p.axis(), " is out of range for a bottom of shape ",
                   shape_string(bottom[0]->shape())));
  axis_ = p.axis() < 0 ? p.axis() + axes : p.axis();
  inputs_ = bottom[0]->count(axis_);
  plan_slices();
  const Shape weight_shape = transpose_ ? Shape{inputs_, num_output_} : Shape{num_output_, inputs_};
  fill(this->add_param(weight_shape), p.weight_filler(), rng);
  if (bias_term_) fill(this->add_param({num_output_}), p.bias_filler(), rng);
}

template <typename T>
void InnerProductLayer<T>::reshape(const BlobVec<T>& bottom, const BlobVec<T>& top) {
  const Blob<T>& in = *bottom[0];
  if (in.num_axes() <= axis_ || in.count(axis_) != inputs_)
    this->fail(cat("bottom of shape ", shape_string(in.shape()), " does not have ", inputs_,
                   " elements from axis ", axis_, " on, as the weights were made for"));
  rows_ = in.count(0, axis_);
  Shape shape(in.shape().begin(), in.shape().begin() + axis_);
  shape.push_back(num_output_);
  top[0]->reshape(shape);
}

template <typename T>
void InnerProductLayer<T>::forward_cpu(const RunContext&, const BlobVec<T>& bottom,
                                       const BlobVec<T>& top) {
  T* out = top[0]->mutable_data();
  if (!forward_on_onednn(bottom[0]->data(), out)) {
    const T* in = operand(Operand::kInput, bottom[0]->data(), bottom[0]->count());
    const T* weight = weight_operand();
    if (transpose_)
      blas::gemm(false, false, rows_, num_output_, inputs_, T(1), in, weight, T(0), out);
    else
      forward_in_slices(in, weight, out);
  }
  if (!bias_term_) return;
  const T* bias = this->params_[1]->data();
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows_; ++r)
    for (int64_t o = 0; o < num_output_; ++o) out[r * num_output_ + o] += bias[o];
}

template <typename T>
void InnerProductLayer<T>::backward_cpu(const RunContext& ctx, const BlobVec<T>& top,
                                        const std::vector<bool>& propagate_down,
                                        const BlobVec<T>& bottom) {
  round_in_place(top[0]->mutable_diff(), top[0]->count());
  const T* out_diff = top[0]->diff();
  T* weight_diff = this->params_[0]->mutable_diff();
  T* in_diff = propagate_down[0] ? bottom[0]->mutable_diff() : nullptr;
  if (staged_out_rows_) {
    const FactorShape f = factor_shape();
    std::memcpy(staged_out_rows_ + ctx.micro_batch * f.out_elements(), out_diff,
                f.out_elements() * sizeof(T));
    std::memcpy(staged_in_rows_ + ctx.micro_batch * f.in_elements(),
                operand(Operand::kInput, bottom[0]->data(), bottom[0]->count()),
                f.in_elements() * sizeof(T));
    weight_diff = nullptr;  // the factors leave instead
  }
  if (bias_term_) {
    // b += out_diff^T * ones(M), as a GEMV over the rows of out_diff.
    const std::vector<T> ones(static_cast<size_t>(rows_), T(1));
    blas::gemv(true, rows_, num_output_, T(1), out_diff, ones.data(), T(1),
               this->params_[1]->mutable_diff());
  }
  if (backward_on_onednn(bottom[0]->data(), out_diff, weight_diff, in_diff)) return;
  // Each rounded (16-bit runs) only when a product reads it.
  const T* in =
      weight_diff ? operand(Operand::kInput, bottom[0]->data(), bottom[0]->count()) : nullptr;
  const T* weight = in_diff ? weight_operand() : nullptr;
  if (!transpose_) return backward_in_slices(in, out_diff, weight, weight_diff, in_diff);
  if (weight_diff)  // W [K x N] += in^T [K x M] * out_diff [M x N]
    blas::gemm(true, false, inputs_, num_output_, rows_, T(1), in, out_diff, T(1), weight_diff);
  if (in_diff)  // in_diff [M x K] = out_diff [M x N] * W^T [N x K]
    blas::gemm(false, true, rows_, inputs_, num_output_, T(1), out_diff, weight, T(0), in_diff);
}

template <typename T>
const T* InnerProductLayer<T>::weight_operand() {
  const T* weight = this->params_[0]->data();
  return stage_ ? weight : operand(Operand::kWeight, weight, this->params_[0]->count());
}

template <typename T>
OneDnnInnerProduct* InnerProductLayer<T>::bf16_kernels() {
#ifdef CGDP_HAVE_ONEDNN
  if (!std::is_same_v<T, float> || this->device().kind() != DeviceKind::Cpu || onednn_failed_ ||
      layer_precision() != Precision::kBf16 || !cpu_has_bf16())
    return nullptr;
  OneDnnInnerProductShape shape{rows_, inputs_, num_output_, transpose_};
  if (!transpose_) shape.slice_rows = slice_rows_, shape.slice_columns = slice_columns_;
  if (!onednn_ || !(onednn_->shape() == shape)) {
    onednn_ = OneDnnInnerProduct::create(shape);
    onednn_failed_ = onednn_ == nullptr;  // no kernels for this shape: OpenBLAS from now on
  }
  return onednn_.get();
#else
  return nullptr;
#endif
}

template <typename T>
bool InnerProductLayer<T>::forward_on_onednn(const T* in, T* out) {
#ifdef CGDP_HAVE_ONEDNN
  if constexpr (std::is_same_v<T, float>) {
    if (OneDnnInnerProduct* ip = bf16_kernels()) {
      ip->forward(in, this->params_[0]->data(), out, stage_);
      return true;
    }
  }
#endif
  (void)in, (void)out;
  return false;
}

template <typename T>
bool InnerProductLayer<T>::backward_on_onednn(const T* in, const T* out_diff, T* weight_diff,
                                              T* in_diff) {
#ifdef CGDP_HAVE_ONEDNN
  if constexpr (std::is_same_v<T, float>) {
    if (OneDnnInnerProduct* ip = bf16_kernels()) {
      ip->backward(in, this->params_[0]->data(), out_diff, weight_diff, in_diff, stage_);
      return true;
    }
  }
#endif
  (void)in, (void)out_diff, (void)weight_diff, (void)in_diff;
  return false;
}

template <typename T>
void InnerProductLayer<T>::stage_factors(T* out_rows, T* in_rows) {
  CGDP_ASSERT((out_rows == nullptr) == (in_rows == nullptr));
  staged_out_rows_ = out_rows;
  staged_in_rows_ = in_rows;
}

template <typename T>
void InnerProductLayer<T>::rebuild_weight_diff(const RunContext& ctx, const T* out_rows,
                                               const T* in_rows, int64_t rows) {
#ifdef CGDP_HAVE_CUDA
  if (this->device().kind() == DeviceKind::Cuda)
    return rebuild_weight_diff_cuda(ctx, out_rows, in_rows, rows);
#endif
  T* weight_diff = this->params_[0]->mutable_diff();
  if (transpose_) {  // W [K x N] = in^T [K x R] * out [R x N]
    blas::gemm(true, false, inputs_, num_output_, rows, T(1), in_rows, out_rows, T(0), weight_diff);
  } else {  // W [N x K] = out^T [N x R] * in [R x K]
    blas::gemm(true, false, num_output_, inputs_, rows, T(1), out_rows, in_rows, T(0), weight_diff);
  }
}

// fp32 layers on CUDA: cuBLAS multiplies bf16 on the tensor cores. Elsewhere the rows are widened.
template <typename T>
bool InnerProductLayer<T>::rebuilds_from_bf16() const {
#ifdef CGDP_HAVE_CUDA
  return std::is_same_v<T, float> && this->device().kind() == DeviceKind::Cuda;
#else
  return false;
#endif
}

template <typename T>
void InnerProductLayer<T>::rebuild_weight_diff_bf16(const RunContext& ctx, const uint16_t* out_rows,
                                                    const uint16_t* in_rows, int64_t rows) {
  CGDP_ASSERT(rebuilds_from_bf16());
#ifdef CGDP_HAVE_CUDA
  rebuild_weight_diff_bf16_cuda(ctx, out_rows, in_rows, rows);
#else
  (void)ctx, (void)out_rows, (void)in_rows, (void)rows;
#endif
}

template class InnerProductLayer<float>;
template class InnerProductLayer<double>;

}  // namespace cgdp
