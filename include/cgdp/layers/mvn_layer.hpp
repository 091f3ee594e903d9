// MVN (Caffe's mean-variance normalisation): each row (a sample's channel, or its whole sample with
// across_channels) minus its mean, divided by sqrt(variance) + eps when normalize_variance.
#pragma once

#include <memory>

#include "cgdp/layers/layer.hpp"

namespace cgdp {

template <typename T>
class MVNLayer final : public Layer<T> {
 public:
  using Layer<T>::Layer;
  bool can_run_in_place() const override { return true; }
  void reshape(const BlobVec<T>& bottom, const BlobVec<T>& top) override;

 protected:
  void forward_cpu(const RunContext& ctx, const BlobVec<T>& bottom, const BlobVec<T>& top) override;
  void backward_cpu(const RunContext& ctx, const BlobVec<T>& top, const std::vector<bool>& propagate_down,
                    const BlobVec<T>& bottom) override;
#ifdef CGDP_HAVE_CUDA
  void forward_cuda(const RunContext& ctx, const BlobVec<T>& bottom, const BlobVec<T>& top) override;
  void backward_cuda(const RunContext& ctx, const BlobVec<T>& top, const std::vector<bool>& propagate_down,
                     const BlobVec<T>& bottom) override;
#endif

 private:
  int64_t rows_ = 0, dim_ = 0;
  std::unique_ptr<Blob<T>> scale_;  // sqrt(variance) + eps per row, for backward (1 without variance)
};

}  // namespace cgdp
