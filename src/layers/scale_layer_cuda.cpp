// Scale on CUDA: kernels/scale.cu; in place, the input is kept in bottom_copy_ (or read from the
// BatchNorm before it) as on the CPU. Run inside that BatchNorm, it hands both its passes over.
#include "cgdp/layers/batch_norm_layer.hpp"
#include "cgdp/layers/scale_layer.hpp"
#include "cuda_layer.hpp"
#include "scale.cuh"

namespace cgdp {

template <typename T>
void ScaleLayer<T>::forward_cuda(const RunContext& ctx, const BlobVec<T>& bottom,
                                 const BlobVec<T>& top) {
  if (batch_norm_) return;  // the BatchNorm before it wrote the scaled values
  Stream& stream = layer_stream(*this, ctx);
  const T* x = bottom[0]->data();
  if (copies_input(bottom, top) && bottom[0]->count() > 0)
    stream.copy_async(bottom_copy_.mutable_data(), x, bottom[0]->bytes());
  const T* bias = this->params_.size() > 1 ? this->params_[1]->data() : nullptr;
  kernels::scale_forward(x, this->params_[0]->data(), bias, {outer_, scale_dim_, inner_},
                         top[0]->mutable_data(), native_stream(stream));
}

template <typename T>
void ScaleLayer<T>::backward_cuda(const RunContext& ctx, const BlobVec<T>& top,
                                  const std::vector<bool>& propagate_down,
                                  const BlobVec<T>& bottom) {
  T* bias_diff = this->params_.size() > 1 ? this->params_[1]->mutable_diff() : nullptr;
  if (batch_norm_)
    return batch_norm_->backward_through_scale(ctx, top[0]->diff(),
                                               this->params_[0]->mutable_diff(), bias_diff,
                                               bottom[0]->mutable_diff());
  Stream& stream = layer_stream(*this, ctx);
  const T* x = input_for_backward(bottom, top);
  const kernels::ScaleShape shape{outer_, scale_dim_, inner_};
  kernels::scale_backward(
      x, top[0]->diff(), this->params_[0]->data(), shape, this->params_[0]->mutable_diff(),
      bias_diff, propagate_down[0] ? bottom[0]->mutable_diff() : nullptr,
      stream_workspace(stream, kernels::scale_scratch_bytes(shape)), native_stream(stream));
}

CGDP_INSTANTIATE_CUDA_LAYER(ScaleLayer)

}  // namespace cgdp
