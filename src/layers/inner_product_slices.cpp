// InnerProduct's GEMMs on the CPU, in slices of its weight (weight_slices.hpp): rows of W for the
// output and the weight gradient, columns of W for the input gradient. A streamed weight (issue 35:
// one larger than the run's device budget, VGG-16's fc6) waits in pinned host memory, and each
// slice is copied through a device stage first. A resident weight is multiplied in the very same
// slices, in place: OpenBLAS picks its kernel (and so the order of a sum) by the shape of each
// call, so only identical calls promise the streamed run the resident run's bits. Rounded
// operands (fp16, or bf16 without the CPU's bf16 kernels) round each staged slice in place:
// rounding is elementwise, so a slice of the rounded weight, with no whole rounded copy beside it.
#include <algorithm>

#include "cgdp/device/layer_precision.hpp"
#include "cgdp/layers/blas.hpp"
#include "cgdp/layers/inner_product_layer.hpp"
#include "cgdp/layers/weight_slices.hpp"
#include "layers/rounded_operands.hpp"

namespace cgdp {

template <typename T>
void InnerProductLayer<T>::plan_slices() {
  slice_rows_ = items_per_weight_slice(num_output_, inputs_ * static_cast<int64_t>(sizeof(T)));
  slice_columns_ = items_per_weight_slice(inputs_, num_output_ * static_cast<int64_t>(sizeof(T)));
}

template <typename T>
void InnerProductLayer<T>::stream_weight(Layer<T>* peer) {
  if (!can_stream_weight()) this->fail("cannot stream a transposed weight through the device");
  // Not yet: the CUDA half (a copy stream beside cuBLAS).
  if (this->device().kind() != DeviceKind::Cpu)
    this->fail("a weight streamed from host memory runs on the CPU backend only, for now");
  if (auto* twin = dynamic_cast<InnerProductLayer<T>*>(peer); twin && twin->stage_) {
    stage_ = twin->stage_;  // the test net runs between the train net's passes: one stage serves
    return;
  }
  const int64_t elements = std::max(slice_rows_ * inputs_, num_output_ * slice_columns_);
  owned_stage_ = DeviceBuffer(this->device(), static_cast<size_t>(elements) * sizeof(T));
  stage_ = static_cast<T*>(owned_stage_.get());
}

template <typename T>
void InnerProductLayer<T>::forward_in_slices(const T* in, const T* weight, T* out) {
  T* stage = stage_;
  const int64_t n = num_output_, k = inputs_;
  const int64_t per = slice_rows_;
  for (int64_t r0 = 0; r0 < n; r0 += per) {  // out[:, r0..r0+r) = in * W[r0..r0+r)^T
    const int64_t r = std::min(per, n - r0);
    const T* rows = weight + r0 * k;
    if (stage) {
      this->device().copy(stage, rows, static_cast<size_t>(r * k) * sizeof(T));
      round_in_place(stage, r * k);
      rows = stage;
    }
    blas::gemm(false, true, rows_, r, k, T(1), in, k, rows, k, T(0), out + r0, n);
  }
}

template <typename T>
void InnerProductLayer<T>::backward_in_slices(const T* in, const T* out_diff, const T* weight,
                                              T* weight_diff, T* in_diff) {
  Device& device = this->device();
  T* stage = stage_;
  const int64_t n = num_output_, k = inputs_;
  if (weight_diff) {  // W_diff[r0..r0+r) += out_diff[:, r0..r0+r)^T * in
    const int64_t per = slice_rows_;
    for (int64_t r0 = 0; r0 < n; r0 += per) {
      const int64_t r = std::min(per, n - r0);
      const size_t bytes = static_cast<size_t>(r * k) * sizeof(T);
      T* rows = weight_diff + r0 * k;
      if (stage) device.copy(stage, rows, bytes);  // accumulated on the device, as Caffe's
      blas::gemm(true, false, r, k, rows_, T(1), out_diff + r0, n, in, k, T(1),
                 stage ? stage : rows, k);
      if (stage) device.copy(rows, stage, bytes);
    }
  }
  if (!in_diff) return;
  const int64_t per = slice_columns_;
  for (int64_t c0 = 0; c0 < k; c0 += per) {  // in_diff[:, c0..c0+c) = out_diff * W[:, c0..c0+c)
    const int64_t c = std::min(per, k - c0);
    const T* columns = weight + c0;
    int64_t ld = k;
    if (stage) {  // row by row into a dense [N x c] block
      for (int64_t o = 0; o < n; ++o)
        device.copy(stage + o * c, weight + o * k + c0, static_cast<size_t>(c) * sizeof(T));
      round_in_place(stage, n * c);
      columns = stage;
      ld = c;
    }
    blas::gemm(false, false, rows_, c, n, T(1), out_diff, n, columns, ld, T(0), in_diff + c0, k);
  }
}

#define CGDP_SLICE_MEMBERS(T)                                                    \
  template void InnerProductLayer<T>::plan_slices();                             \
  template void InnerProductLayer<T>::stream_weight(Layer<T>*);                  \
  template void InnerProductLayer<T>::forward_in_slices(const T*, const T*, T*); \
  template void InnerProductLayer<T>::backward_in_slices(const T*, const T*, const T*, T*, T*);
CGDP_SLICE_MEMBERS(float)
CGDP_SLICE_MEMBERS(double)
#undef CGDP_SLICE_MEMBERS

}  // namespace cgdp
