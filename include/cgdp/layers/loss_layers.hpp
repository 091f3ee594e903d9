// Caffe's regression and metric-learning losses: EuclideanLoss, SigmoidCrossEntropyLoss,
// ContrastiveLoss and HingeLoss. Each puts a scalar loss in top[0]; backward scales by the loss
// weight the net wrote into top[0]'s diff. CPU halves in loss_layers.cpp, CUDA halves in
// loss_layers_cuda.cpp with kernels/losses.cu.
#pragma once

#include <optional>

#include "cgdp/layers/class_labels.hpp"
#include "cgdp/layers/layer.hpp"

namespace cgdp {

// A loss layer's common shape: two or three bottoms, one scalar top.
template <typename T>
class LossLayer : public Layer<T> {
 public:
  using Layer<T>::Layer;
  int min_bottoms() const override { return 2; }
  int max_bottoms() const override { return 2; }
  bool is_loss() const override { return true; }
};

// loss = sum((a - b)^2) / (2 N), N the first dimension; both bottoms get a gradient.
template <typename T>
class EuclideanLossLayer final : public LossLayer<T> {
 public:
  using LossLayer<T>::LossLayer;
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
  std::unique_ptr<Blob<T>> diff_;  // a - b from the last forward
};

// Cross-entropy of sigmoid(x) against targets t in [0, 1], computed without overflow:
// loss = -sum(x (t - [x >= 0]) - log(1 + e^(x - 2 x [x >= 0]))) / normalizer, the normalizer from
// loss_param (VALID: the targets not equal to ignore_label); dx = (sigmoid(x) - t) / normalizer.
template <typename T>
class SigmoidCrossEntropyLossLayer final : public LossLayer<T> {
 public:
  SigmoidCrossEntropyLossLayer(const proto::LayerParameter& param, Device& device);
  void reshape(const BlobVec<T>& bottom, const BlobVec<T>& top) override;
  bool can_backward_to(int bottom_index) const override { return bottom_index == 0; }
  int64_t cuda_buffer_bytes(bool) const override { return sizeof(double); }  // its normaliser

 protected:
  void forward_cpu(const RunContext& ctx, const BlobVec<T>& bottom, const BlobVec<T>& top) override;
  void backward_cpu(const RunContext& ctx, const BlobVec<T>& top, const std::vector<bool>& propagate_down,
                    const BlobVec<T>& bottom) override;
#ifdef CGDP_HAVE_CUDA
  void forward_cuda(const RunContext& ctx, const BlobVec<T>& bottom, const BlobVec<T>& top) override;
  void backward_cuda(const RunContext& ctx, const BlobVec<T>& top, const std::vector<bool>& propagate_down,
                     const BlobVec<T>& bottom) override;
#endif

 public:
  using Mode = proto::LossParameter::NormalizationMode;

 private:
  Mode mode_ = proto::LossParameter::VALID;
  std::optional<int> ignore_label_;
  int64_t outer_ = 0;  // the first dimension: BATCH_SIZE's normalizer
};

// Hadsell et al.'s contrastive loss over pairs (a_i, b_i) with y_i = 1 for similar pairs:
// loss = sum(y d^2 + (1 - y) max(margin - d, 0)^2) / (2 N), d = ||a_i - b_i||; legacy_version
// uses max(margin - d^2, 0) for dissimilar pairs. Gradients to a and b, none to y.
template <typename T>
class ContrastiveLossLayer final : public LossLayer<T> {
 public:
  using LossLayer<T>::LossLayer;
  void reshape(const BlobVec<T>& bottom, const BlobVec<T>& top) override;
  int min_bottoms() const override { return 3; }
  int max_bottoms() const override { return 3; }
  bool can_backward_to(int bottom_index) const override { return bottom_index < 2; }

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
  std::unique_ptr<Blob<T>> diff_, dist_sq_;  // a - b, and ||a_i - b_i||^2 per pair
  int64_t pairs_ = 0, dim_ = 0;
};

// One-vs-all hinge loss of scores x (N x K) against class labels: with s = -x for the label's class
// and +x for the others, loss = sum(max(0, 1 + s)) / N (L1) or sum(max(0, 1 + s)^2) / N (L2).
template <typename T>
class HingeLossLayer final : public LossLayer<T> {
 public:
  using LossLayer<T>::LossLayer;
  void reshape(const BlobVec<T>& bottom, const BlobVec<T>& top) override;
  bool can_backward_to(int bottom_index) const override { return bottom_index == 0; }
  int64_t cuda_buffer_bytes(bool) const override { return cuda_label_bytes(ca_); }  // its labels

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
  ClassAxis ca_;
  std::unique_ptr<Blob<T>> margins_;  // max(0, 1 + s) from the last forward
  std::vector<int64_t> labels_;       // CPU: the class of each sample
};

}  // namespace cgdp
