// Crop (Caffe's, as FCN uses it): bottom 0 cut to bottom 1's shape from `axis` (default 2) on, at
// crop_param.offset (none: 0; one: every cropped axis; else one per cropped axis). The gradient
// goes to bottom 0 only: zero outside the crop.
#pragma once

#include <vector>

#include "cgdp/layers/layer.hpp"

namespace cgdp {

template <typename T>
class CropLayer final : public Layer<T> {
 public:
  using Layer<T>::Layer;
  void reshape(const BlobVec<T>& bottom, const BlobVec<T>& top) override;
  int min_bottoms() const override { return 2; }
  int max_bottoms() const override { return 2; }
  bool can_backward_to(int bottom_index) const override { return bottom_index == 0; }
  // Its backward reads no values (gradients only).
  bool backward_reads(const Blob<T>&, const BlobVec<T>&, const BlobVec<T>&) const override {
    return false;
  }

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
  // Where top element `i` lies in bottom 0.
  int64_t source_index(int64_t i, const Shape& top, const Shape& in) const;
  std::vector<int64_t> offsets_;  // per axis of bottom 0 (0 before `axis`)
};

}  // namespace cgdp
