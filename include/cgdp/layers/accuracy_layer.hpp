// Accuracy: the fraction of predictions whose label is among the top_k scores along `axis`
// (ties count against), ignoring ignore_label. top[0] is a scalar. It has no gradient.
#pragma once

#include <optional>

#include "cgdp/layers/class_labels.hpp"

namespace cgdp {

template <typename T>
class AccuracyLayer final : public Layer<T> {
 public:
  using Layer<T>::Layer;
  void reshape(const BlobVec<T>& bottom, const BlobVec<T>& top) override;
  int64_t cuda_buffer_bytes(bool) const override { return cuda_label_bytes(ca_); }  // its labels
  int min_bottoms() const override { return 2; }
  int max_bottoms() const override { return 2; }
  bool can_backward_to(int) const override { return false; }

 protected:
  void layer_setup(const BlobVec<T>& bottom, const BlobVec<T>& top, Rng& rng) override;
  void forward_cpu(const RunContext& ctx, const BlobVec<T>& bottom, const BlobVec<T>& top) override;
  void backward_cpu(const RunContext&, const BlobVec<T>&, const std::vector<bool>&,
                    const BlobVec<T>&) override {}
#ifdef CGDP_HAVE_CUDA
  void forward_cuda(const RunContext& ctx, const BlobVec<T>& bottom, const BlobVec<T>& top) override;
#endif
  void backward_cuda(const RunContext&, const BlobVec<T>&, const std::vector<bool>&,
                     const BlobVec<T>&) override {}

 private:
  std::optional<int> ignore_label_;
  ClassAxis ca_;
};

}  // namespace cgdp
