// InnerProduct: a fully connected layer. The bottom is flattened from `axis` on into K inputs;
// top = bottom * W^T + b with W [num_output, K], or bottom * W with W [K, num_output] when
// `transpose` (Caffe's layout for both). Its weight gradient can leave as sufficient factors
// (sufficient_factors.hpp).
#pragma once

#include <memory>

#include "cgdp/layers/layer.hpp"
#include "cgdp/layers/sufficient_factors.hpp"

namespace cgdp {

class OneDnnInnerProduct;

template <typename T>
class InnerProductLayer final : public Layer<T>, public SufficientFactors<T> {
 public:
  using Layer<T>::Layer;
  void reshape(const BlobVec<T>& bottom, const BlobVec<T>& top) override;
  // The bias's column of M ones.
  int64_t cuda_buffer_bytes(bool) const override {
    return bias_term_ ? rows_ * static_cast<int64_t>(sizeof(T)) : 0;
  }
  // Only its input, as a rounded operand (of the weight gradient, or the staged factors).
  bool backward_reads(const Blob<T>& blob, const BlobVec<T>& bottom,
                      const BlobVec<T>&) const override {
    return &blob == bottom[0];
  }
  bool backward_exact_from_16_bits(const Blob<T>&, const BlobVec<T>&,
                                   const BlobVec<T>&) const override {
    return true;
  }
  FactorShape factor_shape() const override { return {rows_, num_output_, inputs_}; }
  void stage_factors(T* out_rows, T* in_rows) override;
  void rebuild_weight_diff(const RunContext& ctx, const T* out_rows, const T* in_rows,
                           int64_t rows) override;
  bool rebuilds_from_bf16() const override;
  // Whether this float CPU layer multiplies on oneDNN's bf16 kernels in a bf16 run (rather than
  // rounding its operands for OpenBLAS's fp32 GEMM); builds them for the current shape.
  bool runs_bf16_kernels() { return bf16_kernels() != nullptr; }
  void rebuild_weight_diff_bf16(const RunContext& ctx, const uint16_t* out_rows,
                                const uint16_t* in_rows, int64_t rows) override;
  bool can_stream_weight() const override { return !transpose_; }
  void stream_weight(Layer<T>* peer) override;

 protected:
  void layer_setup(const BlobVec<T>& bottom, const BlobVec<T>& top, Rng& rng) override;
  void forward_cpu(const RunContext& ctx, const BlobVec<T>& bottom, const BlobVec<T>& top) override;
  void backward_cpu(const RunContext& ctx, const BlobVec<T>& top,
                    const std::vector<bool>& propagate_down, const BlobVec<T>& bottom) override;
#ifdef CGDP_HAVE_CUDA
  void forward_cuda(const RunContext& ctx, const BlobVec<T>& bottom, const BlobVec<T>& top) override;
  void backward_cuda(const RunContext& ctx, const BlobVec<T>& top,
                     const std::vector<bool>& propagate_down, const BlobVec<T>& bottom) override;
  void rebuild_weight_diff_cuda(const RunContext& ctx, const T* out_rows, const T* in_rows,
                                int64_t rows);
  void rebuild_weight_diff_bf16_cuda(const RunContext& ctx, const uint16_t* out_rows,
                                     const uint16_t* in_rows, int64_t rows);
  // backward_cuda's weight and input gradients in bf16/fp16 (layer_precision()).
  void backward_half_cuda(const RunContext& ctx, const BlobVec<T>& top,
                          const std::vector<bool>& propagate_down, const BlobVec<T>& bottom);
#endif

 private:
  int64_t num_output_ = 0;  // N
  int64_t inputs_ = 0;      // K: bottom elements from `axis` on
  int64_t rows_ = 0;        // M: bottom elements before `axis`
  int axis_ = 1;
  bool bias_term_ = true;
  bool transpose_ = false;
  // oneDNN's bf16 inner products (onednn_inner_product.cpp) in bf16 on a CPU that has them.
  OneDnnInnerProduct* bf16_kernels();
  // forward's and backward's products on bf16_kernels(); false where the layer has none.
  bool forward_on_onednn(const T* in, T* out);
  bool backward_on_onednn(const T* in, const T* out_diff, T* weight_diff, T* in_diff);
  std::shared_ptr<OneDnnInnerProduct> onednn_;  // shared_ptr: deletable where it is incomplete
  bool onednn_failed_ = false;                  // oneDNN had no kernels for a shape: OpenBLAS
  // The GEMMs of an untransposed weight, in slices of at most weight_slice_bytes(): rows for
  // the output and the weight gradient, columns for the input gradient. A streamed weight
  // (Blob::on_host) comes through stage_ slice by slice (inner_product_slices.cpp).
  void plan_slices();  // from weight_slice_bytes(), once: the stage is sized by them
  int64_t slice_rows_ = 1, slice_columns_ = 1;
  // params()[0] as the GEMMs read it: a rounded copy with rounded operands, but a streamed weight
  // as it is (each slice is rounded in the stage).
  const T* weight_operand();
  void forward_in_slices(const T* in, const T* weight, T* out);
  void backward_in_slices(const T* in, const T* out_diff, const T* weight, T* weight_diff,
                          T* in_diff);
  DeviceBuffer owned_stage_;      // stream_weight(): a slice of rows or of columns
  T* stage_ = nullptr;            // it, or the train net twin's (a test net's layer)
  T* staged_out_rows_ = nullptr;  // stage_factors: where backward copies its factors instead
  T* staged_in_rows_ = nullptr;
};

}  // namespace cgdp
