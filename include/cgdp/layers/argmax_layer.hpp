// ArgMax (Caffe's): the top_k largest values' indices along `axis` (or over each sample's values,
// flattened), ties to the larger index as Caffe's sort gives them; with out_max_val, the values
// too (beside the indices when flattened, instead of them along an axis). No gradient.
#pragma once

#include "cgdp/layers/layer.hpp"

namespace cgdp {

template <typename T>
class ArgMaxLayer final : public Layer<T> {
 public:
  using Layer<T>::Layer;
  void reshape(const BlobVec<T>& bottom, const BlobVec<T>& top) override;
  bool can_backward_to(int) const override { return false; }

  // Rows, each of `dim` values `stride` apart (Caffe's num, dim, axis_dist).
  struct Geometry {
    int64_t rows = 0, dim = 0, stride = 1, top_k = 1;
    bool has_axis = false, out_max_val = false;
  };

 protected:
  void forward_cpu(const RunContext& ctx, const BlobVec<T>& bottom, const BlobVec<T>& top) override;
  void backward_cpu(const RunContext&, const BlobVec<T>&, const std::vector<bool>&, const BlobVec<T>&) override {}
#ifdef CGDP_HAVE_CUDA
  void forward_cuda(const RunContext& ctx, const BlobVec<T>& bottom, const BlobVec<T>& top) override;
  void backward_cuda(const RunContext&, const BlobVec<T>&, const std::vector<bool>&, const BlobVec<T>&) override {}
#endif

 private:
  Geometry g_;
};

}  // namespace cgdp
