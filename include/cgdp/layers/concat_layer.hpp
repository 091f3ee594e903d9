// Concat: joins bottoms along `axis` (default 1, channels); all other dimensions must match.
#pragma once

#include "cgdp/layers/layer.hpp"

namespace cgdp {

template <typename T>
class ConcatLayer final : public Layer<T> {
 public:
  using Layer<T>::Layer;
  void reshape(const BlobVec<T>& bottom, const BlobVec<T>& top) override;
  int max_bottoms() const override { return -1; }
  // Its backward reads no values (gradients only).
  bool backward_reads(const Blob<T>&, const BlobVec<T>&, const BlobVec<T>&) const override {
    return false;
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

 private:
  int axis_ = 1;
  int64_t outer_ = 0, inner_ = 0;  // count before and after the concat axis
};

}  // namespace cgdp
