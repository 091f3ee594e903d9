// ReLU: y = max(x, 0) + negative_slope * min(x, 0); may run in place (top == bottom).
#pragma once

#include <algorithm>
#include <cstdint>

#include "cgdp/device/layer_precision.hpp"
#include "cgdp/layers/layer.hpp"

namespace cgdp {

// ReLU's backward where its output is y (slope 0): dx = y > 0 ? dy : 0; dx may be dy. A select:
// multiplying a denormal gradient by a 0/1 mask stalls the core for ~100 cycles.
template <typename T>
inline void relu_gradient(const T* y, const T* dy, T* dx, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) dx[i] = y[i] > 0 ? dy[i] : T(0);
}

// The same from the 16-bit copy of y (Blob::packed_values) whose +infinity has bits `infinity`:
// the mask the values widened back give, with `slope` (Caffe's negative_slope) below it.
template <typename T>
inline void relu_gradient_packed(const uint16_t* y, uint16_t infinity, const T* dy, T* dx,
                                 int64_t n, T slope) {
  if (slope == T(0)) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) dx[i] = read_positive(y[i], infinity) ? dy[i] : T(0);
  } else {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) dx[i] = read_positive(y[i], infinity) ? dy[i] : slope * dy[i];
  }
}

// relu_gradient_packed of y's copy in layer_precision() on the OpenMP threads.
template <typename T>
inline void relu_backward_from_packed(const uint16_t* y, const T* dy, T* dx, int64_t n, T slope) {
  const uint16_t infinity = infinity_bits(layer_precision());
  constexpr int64_t kPiece = 1 << 16;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; i += kPiece)
    relu_gradient_packed(y + i, infinity, dy + i, dx + i, std::min(kPiece, n - i), slope);
}

template <typename T>
class ReLULayer final : public Layer<T> {
 public:
  using Layer<T>::Layer;
  bool can_run_in_place() const override { return true; }
  // Each element alike and alone: any layout.
  bool handles_channel_block(bool, int64_t) const override { return true; }
  void reshape(const BlobVec<T>& bottom, const BlobVec<T>& top) override;
  // The mask is the values' sign, which bf16 keeps and fp16 may not (keeps_signs).
  bool backward_exact_from_16_bits(const Blob<T>&, const BlobVec<T>&,
                                   const BlobVec<T>&) const override {
    return keeps_signs(layer_precision());
  }
  bool backward_reads_only_sign(const Blob<T>&, const BlobVec<T>&,
                                const BlobVec<T>&) const override {
    return true;
  }
  // fp16's lost signs drop only the gradients of values below 2^-25, as under PyTorch's AMP.
  bool backward_may_round(const Blob<T>&, const BlobVec<T>&, const BlobVec<T>&) const override {
    return true;
  }
  // The sign again: from the copy itself.
  bool backward_reads_packed(const Blob<T>&, const BlobVec<T>&, const BlobVec<T>&) const override {
    return true;
  }

 protected:
  void forward_cpu(const RunContext& ctx, const BlobVec<T>& bottom, const BlobVec<T>& top) override;
  void backward_cpu(const RunContext& ctx, const BlobVec<T>& top,
                    const std::vector<bool>& propagate_down, const BlobVec<T>& bottom) override;
#ifdef CGDP_HAVE_CUDA
  void forward_cuda(const RunContext& ctx, const BlobVec<T>& bottom, const BlobVec<T>& top) override;
  void backward_cuda(const RunContext& ctx, const BlobVec<T>& top,
                     const std::vector<bool>& propagate_down, const BlobVec<T>& bottom) override;
#endif
};

}  // namespace cgdp
