// SoftmaxWithLoss: softmax over softmax_param.axis, then the mean negative log-likelihood of the
// labels in bottom[1] (float class indices, one per prediction). top[0] is the scalar loss; an
// optional top[1] receives the probabilities. Normalisation follows loss_param (VALID by default,
// the legacy `normalize` when normalization is unset); ignore_label positions count for nothing.
#pragma once

#include <optional>

#include "cgdp/layers/class_labels.hpp"
#include "cgdp/layers/softmax_layer.hpp"

namespace cgdp {

template <typename T>
class SoftmaxWithLossLayer final : public Layer<T> {
 public:
  SoftmaxWithLossLayer(const proto::LayerParameter& param, Device& device);
  void reshape(const BlobVec<T>& bottom, const BlobVec<T>& top) override;
  // The decoded labels and the normaliser (one double).
  int64_t cuda_buffer_bytes(bool) const override {
    return cuda_label_bytes(ca_) + static_cast<int64_t>(sizeof(double));
  }
  int min_bottoms() const override { return 2; }
  int max_bottoms() const override { return 2; }
  int max_tops() const override { return 2; }
  bool is_loss() const override { return true; }
  bool can_backward_to(int bottom_index) const override { return bottom_index == 0; }

 protected:
  void layer_setup(const BlobVec<T>& bottom, const BlobVec<T>& top, Rng& rng) override;
  void forward_cpu(const RunContext& ctx, const BlobVec<T>& bottom, const BlobVec<T>& top) override;
  void backward_cpu(const RunContext& ctx, const BlobVec<T>& top,
                    const std::vector<bool>& propagate_down, const BlobVec<T>& bottom) override;
#ifdef CGDP_HAVE_CUDA
  void forward_cuda(const RunContext& ctx, const BlobVec<T>& bottom, const BlobVec<T>& top) override;
  void backward_cuda(const RunContext& ctx, const BlobVec<T>& top,
                     const std::vector<bool>& propagate_down, const BlobVec<T>& bottom) override;
#endif

 private:
  // What the summed loss is divided by (at least 1), per Caffe's get_normalizer().
  double normalizer(int64_t valid_count) const;

  using Mode = proto::LossParameter::NormalizationMode;
  Mode mode_ = proto::LossParameter::VALID;
  std::optional<int> ignore_label_;
  SoftmaxLayer<T> softmax_;
  Blob<T> prob_;
  ClassAxis ca_;
  std::vector<int64_t> labels_;  // class per prediction from the last forward, -1 if ignored
  int64_t valid_count_ = 0;
};

}  // namespace cgdp
