// Slice: cuts the bottom along `axis` (default 1) into its tops, at slice_param.slice_point or
// into equal parts; Concat's inverse.
#pragma once

#include <vector>

#include "cgdp/layers/layer.hpp"

namespace cgdp {

template <typename T>
class SliceLayer final : public Layer<T> {
 public:
  using Layer<T>::Layer;
  void reshape(const BlobVec<T>& bottom, const BlobVec<T>& top) override;
  int min_tops() const override { return 1; }
  int max_tops() const override { return -1; }
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
  int64_t outer_ = 0, inner_ = 0;  // count before and after the slice axis
};

}  // namespace cgdp
