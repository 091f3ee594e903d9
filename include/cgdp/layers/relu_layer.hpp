// ReLU: y = max(x, 0) + negative_slope * min(x, 0); may run in place (top == bottom).
#pragma once

#include <cstdint>

#include "cgdp/layers/layer.hpp"

namespace cgdp {

// ReLU's backward where its output is y (slope 0): dx = y > 0 ? dy : 0; dx may be dy. A select:
// multiplying a denormal gradient by a 0/1 mask stalls the core for ~100 cycles.
template <typename T>
inline void relu_gradient(const T* y, const T* dy, T* dx, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) dx[i] = y[i] > 0 ? dy[i] : T(0);
}

template <typename T>
class ReLULayer final : public Layer<T> {
 public:
  using Layer<T>::Layer;
  bool can_run_in_place() const override { return true; }
  // Each element alike and alone: any layout.
  bool handles_channel_block(bool, int64_t) const override { return true; }
  void reshape(const BlobVec<T>& bottom, const BlobVec<T>& top) override;
  // The mask is the values' sign, which rounding keeps (short of magnitudes below the 16-bit
  // format's smallest number, which round to zero).
  bool backward_exact_from_16_bits(const Blob<T>&, const BlobVec<T>&,
                                   const BlobVec<T>&) const override {
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
