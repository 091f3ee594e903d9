// Silence: consumes blobs nobody else reads, so they are not reported as outputs; no tops, no work
// (the same on both backends), no gradient.
#pragma once

#include "cgdp/layers/layer.hpp"

namespace cgdp {

template <typename T>
class SilenceLayer final : public Layer<T> {
 public:
  using Layer<T>::Layer;
  void reshape(const BlobVec<T>&, const BlobVec<T>&) override {}
  int max_bottoms() const override { return -1; }
  int min_tops() const override { return 0; }
  int max_tops() const override { return 0; }
  bool can_backward_to(int) const override { return false; }

 protected:
  void forward_cpu(const RunContext&, const BlobVec<T>&, const BlobVec<T>&) override {}
  void backward_cpu(const RunContext&, const BlobVec<T>&, const std::vector<bool>&, const BlobVec<T>&) override {}
#ifdef CGDP_HAVE_CUDA
  void forward_cuda(const RunContext&, const BlobVec<T>&, const BlobVec<T>&) override {}
  void backward_cuda(const RunContext&, const BlobVec<T>&, const std::vector<bool>&, const BlobVec<T>&) override {}
#endif
};

}  // namespace cgdp
