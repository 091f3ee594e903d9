// Softmax over `axis` (default 1): y = exp(x - max) / sum exp(x - max) along that axis.
#pragma once

#include "cgdp/layers/layer.hpp"

namespace cgdp {

template <typename T>
class SoftmaxLayer final : public Layer<T> {
 public:
  using Layer<T>::Layer;
  bool can_run_in_place() const override { return true; }
  void reshape(const BlobVec<T>& bottom, const BlobVec<T>& top) override;

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
  int64_t outer_ = 0, classes_ = 0, inner_ = 0;
};

}  // namespace cgdp
