// The regression and metric-learning losses on CUDA (kernels/losses.cu); HingeLoss decodes its
// labels on the device as SoftmaxWithLoss does.
#include "cgdp/layers/loss_layers.hpp"
#include "class_labels_cuda.hpp"
#include "cuda_layer.hpp"
#include "losses.cuh"

namespace cgdp {

namespace {

struct SigmoidCeCuda final : LayerBackendState {
  explicit SigmoidCeCuda(Device& device) : normalizer(device, sizeof(double)) {}
  DeviceBuffer normalizer;  // the last forward's, for backward
};

template <typename T>
struct HingeCuda final : LayerBackendState {
  explicit HingeCuda(Device& device) : labels(device) {}
  CudaLabels<T> labels;
  const int64_t* decoded = nullptr;  // the last forward's classes, on the device
};

}  // namespace

template <typename T>
void EuclideanLossLayer<T>::forward_cuda(const RunContext& ctx, const BlobVec<T>& bottom, const BlobVec<T>& top) {
  kernels::euclidean_forward(bottom[0]->data(), bottom[1]->data(), diff_->mutable_data(), bottom[0]->count(),
                             bottom[0]->shape(0), top[0]->mutable_data(), native_stream(layer_stream(*this, ctx)));
}

template <typename T>
void EuclideanLossLayer<T>::backward_cuda(const RunContext& ctx, const BlobVec<T>& top,
                                          const std::vector<bool>& propagate_down, const BlobVec<T>& bottom) {
  for (int b = 0; b < 2; ++b)
    if (propagate_down[b])
      kernels::scaled_by_loss_weight(diff_->data(), diff_->count(), (b == 0 ? T(1) : T(-1)) / static_cast<T>(bottom[0]->shape(0)),
                                     top[0]->diff(), bottom[b]->mutable_diff(), native_stream(layer_stream(*this, ctx)));
}

template <typename T>
void SigmoidCrossEntropyLossLayer<T>::forward_cuda(const RunContext& ctx, const BlobVec<T>& bottom,
                                                   const BlobVec<T>& top) {
  auto& s = this->template backend_state<SigmoidCeCuda>(this->device());
  kernels::sigmoid_ce_forward(bottom[0]->data(), bottom[1]->data(), bottom[0]->count(), ignore_label_.has_value(),
                              static_cast<T>(ignore_label_.value_or(0)), static_cast<int>(mode_), outer_,
                              top[0]->mutable_data(), static_cast<double*>(s.normalizer.get()),
                              native_stream(layer_stream(*this, ctx)));
}

template <typename T>
void SigmoidCrossEntropyLossLayer<T>::backward_cuda(const RunContext& ctx, const BlobVec<T>& top,
                                                    const std::vector<bool>& propagate_down, const BlobVec<T>& bottom) {
  if (!propagate_down[0]) return;
  auto& s = this->template backend_state<SigmoidCeCuda>(this->device());
  kernels::sigmoid_ce_backward(bottom[0]->data(), bottom[1]->data(), bottom[0]->count(), ignore_label_.has_value(),
                               static_cast<T>(ignore_label_.value_or(0)), static_cast<const double*>(s.normalizer.get()),
                               top[0]->diff(), bottom[0]->mutable_diff(), native_stream(layer_stream(*this, ctx)));
}

template <typename T>
void ContrastiveLossLayer<T>::forward_cuda(const RunContext& ctx, const BlobVec<T>& bottom, const BlobVec<T>& top) {
  const auto& p = this->param_.contrastive_loss_param();
  kernels::contrastive_forward(bottom[0]->data(), bottom[1]->data(), bottom[2]->data(), pairs_, dim_,
                               static_cast<T>(p.margin()), p.legacy_version(), diff_->mutable_data(),
                               dist_sq_->mutable_data(), top[0]->mutable_data(), native_stream(layer_stream(*this, ctx)));
}

template <typename T>
void ContrastiveLossLayer<T>::backward_cuda(const RunContext& ctx, const BlobVec<T>& top,
                                            const std::vector<bool>& propagate_down, const BlobVec<T>& bottom) {
  const auto& p = this->param_.contrastive_loss_param();
  for (int b = 0; b < 2; ++b)
    if (propagate_down[b])
      kernels::contrastive_backward(bottom[2]->data(), diff_->data(), dist_sq_->data(), pairs_, dim_,
                                    static_cast<T>(p.margin()), p.legacy_version(),
                                    (b == 0 ? T(1) : T(-1)) / static_cast<T>(pairs_), top[0]->diff(),
                                    bottom[b]->mutable_diff(), native_stream(layer_stream(*this, ctx)));
}

template <typename T>
void HingeLossLayer<T>::forward_cuda(const RunContext& ctx, const BlobVec<T>& bottom, const BlobVec<T>& top) {
  Stream& stream = layer_stream(*this, ctx);
  auto& s = this->template backend_state<HingeCuda<T>>(this->device());
  s.decoded = s.labels.decode(*this, ca_, bottom[1]->data(), std::nullopt, ctx.sample_offset, stream);
  kernels::hinge_forward(bottom[0]->data(), s.decoded, ca_.outer, ca_.classes,
                         this->param_.hinge_loss_param().norm() == proto::HingeLossParameter::L2,
                         margins_->mutable_data(), top[0]->mutable_data(), native_stream(stream));
}

template <typename T>
void HingeLossLayer<T>::backward_cuda(const RunContext& ctx, const BlobVec<T>& top,
                                      const std::vector<bool>& propagate_down, const BlobVec<T>& bottom) {
  if (!propagate_down[0]) return;
  auto& s = this->template backend_state<HingeCuda<T>>(this->device());
  kernels::hinge_backward(margins_->data(), s.decoded, ca_.outer, ca_.classes,
                          this->param_.hinge_loss_param().norm() == proto::HingeLossParameter::L2, top[0]->diff(),
                          bottom[0]->mutable_diff(), native_stream(layer_stream(*this, ctx)));
}

CGDP_INSTANTIATE_CUDA_LAYER(EuclideanLossLayer)
CGDP_INSTANTIATE_CUDA_LAYER(SigmoidCrossEntropyLossLayer)
CGDP_INSTANTIATE_CUDA_LAYER(ContrastiveLossLayer)
CGDP_INSTANTIATE_CUDA_LAYER(HingeLossLayer)

}  // namespace cgdp
