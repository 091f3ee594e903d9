// SoftmaxWithLoss on CUDA: the inner Softmax through cuDNN, the labels decoded on the device
// (class_labels_cuda.hpp), the loss and its gradient by kernels/softmax_loss.cu.
#include "cgdp/layers/softmax_with_loss_layer.hpp"
#include "class_labels_cuda.hpp"
#include "cuda_layer.hpp"
#include "softmax_loss.cuh"

namespace cgdp {

namespace {

template <typename T>
struct SoftmaxLossCuda final : LayerBackendState {
  explicit SoftmaxLossCuda(Device& device) : labels(device) {}
  CudaLabels<T> labels;
  const int64_t* decoded = nullptr;  // the last forward's class indices, for backward
  DeviceBuffer normalizer;           // one double, from the last forward
};

}  // namespace

template <typename T>
void SoftmaxWithLossLayer<T>::forward_cuda(const RunContext& ctx, const BlobVec<T>& bottom,
                                           const BlobVec<T>& top) {
  Stream& stream = layer_stream(*this, ctx);
  auto& s = this->template backend_state<SoftmaxLossCuda<T>>(this->device());
  softmax_.forward(ctx, {bottom[0]}, {&prob_});
  s.decoded = s.labels.decode(*this, ca_, bottom[1]->data(), ignore_label_, ctx.sample_offset, stream);
  double* normalizer = ensure_buffer<double>(s.normalizer, this->device(), stream, 1);
  kernels::softmax_loss_forward(prob_.data(), s.decoded, {ca_.outer, ca_.classes, ca_.inner},
                                static_cast<kernels::LossNormalization>(mode_),
                                top[0]->mutable_data(), normalizer, native_stream(stream));
  if (top.size() > 1 && prob_.count() > 0)
    stream.copy_async(top[1]->mutable_data(), prob_.data(), prob_.bytes());
}

template <typename T>
void SoftmaxWithLossLayer<T>::backward_cuda(const RunContext& ctx, const BlobVec<T>& top,
                                            const std::vector<bool>& propagate_down,
                                            const BlobVec<T>& bottom) {
  if (propagate_down[1]) this->fail("cannot backpropagate to the labels (bottom 1)");
  if (!propagate_down[0]) return;
  Stream& stream = layer_stream(*this, ctx);
  auto& s = this->template backend_state<SoftmaxLossCuda<T>>(this->device());
  kernels::softmax_loss_backward(prob_.data(), s.decoded, {ca_.outer, ca_.classes, ca_.inner},
                                 top[0]->diff(), static_cast<const double*>(s.normalizer.get()),
                                 bottom[0]->mutable_diff(), native_stream(stream));
}

CGDP_INSTANTIATE_CUDA_LAYER(SoftmaxWithLossLayer)

}  // namespace cgdp
