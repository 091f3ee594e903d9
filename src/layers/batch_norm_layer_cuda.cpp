// BatchNorm on CUDA: own kernels (kernels/batch_norm.cu), because cuDNN's batch norm keeps an
// exponential running average, not Caffe's decayed sums with a scale factor. Their per-channel
// partial sums use the stream's scratch, which no other layer uses while they run.
#include "batch_norm.cuh"
#include "cgdp/layers/batch_norm_layer.hpp"
#include "cuda_layer.hpp"

namespace cgdp {

template <typename T>
void BatchNormLayer<T>::forward_cuda(const RunContext& ctx, const BlobVec<T>& bottom,
                                     const BlobVec<T>& top) {
  Stream& stream = layer_stream(*this, ctx);
  const cudaStream_t native = native_stream(stream);
  const auto& p = this->param_.batch_norm_param();
  use_global_stats_ = p.has_use_global_stats() ? p.use_global_stats() : ctx.phase == Phase::Test;
  const kernels::BatchNormShape shape{num_, channels_, spatial_};
  if (use_global_stats_) {
    kernels::batch_norm_global_statistics(this->state_[0]->data(), this->state_[1]->data(),
                                          this->state_[2]->data(), channels_,
                                          mean_.mutable_data(), variance_.mutable_data(), native);
  } else {
    const int64_t m = num_ * spatial_;
    // Caffe stores the unbiased variance: m / (m - 1) times the batch's.
    const T correction = m > 1 ? static_cast<T>(m) / static_cast<T>(m - 1) : T(1);
    kernels::batch_norm_statistics(
        bottom[0]->data(), shape, mean_.mutable_data(), variance_.mutable_data(),
        this->state_[0]->mutable_data(), this->state_[1]->mutable_data(),
        this->state_[2]->mutable_data(), static_cast<T>(p.moving_average_fraction()), correction,
        stream_workspace(stream, kernels::batch_norm_scratch_bytes(shape)), native);
  }
  kernels::ScaleInside<T> inside;
  if (scale_) inside = {scale_->data(), bias_ ? bias_->data() : nullptr, nullptr, nullptr, relu_};
  kernels::batch_norm_normalize(
      bottom[0]->data(), shape, mean_.data(), variance_.data(), static_cast<T>(p.eps()),
      inv_std_.mutable_data(), top[0]->mutable_data(),
      this->forward_only_ ? top[0]->mutable_data() : x_norm_.mutable_data(), inside, native);
}

template <typename T>
void BatchNormLayer<T>::backward_cuda(const RunContext& ctx, const BlobVec<T>& top,
                                      const std::vector<bool>& propagate_down,
                                      const BlobVec<T>& bottom) {
  // Taken over: the Scale after it ran both backwards (backward_through_scale).
  if (!propagate_down[0] || took_over_scale()) return;
  Stream& stream = layer_stream(*this, ctx);
  const kernels::BatchNormShape shape{num_, channels_, spatial_};
  kernels::batch_norm_backward(
      top[0]->diff(), x_norm_.data(), inv_std_.data(), shape, use_global_stats_,
      kernels::ScaleInside<T>{}, bottom[0]->mutable_diff(),
      stream_workspace(stream, kernels::batch_norm_scratch_bytes(shape)), native_stream(stream));
}

template <typename T>
void BatchNormLayer<T>::backward_through_scale_cuda(const RunContext& ctx, const T* dy,
                                                    T* scale_diff, T* bias_diff, T* dx) {
  Stream& stream = layer_stream(*this, ctx);
  const kernels::BatchNormShape shape{num_, channels_, spatial_};
  const kernels::ScaleInside<T> inside{scale_->data(), nullptr, scale_diff, bias_diff};
  kernels::batch_norm_backward(
      dy, x_norm_.data(), inv_std_.data(), shape, use_global_stats_, inside, dx,
      stream_workspace(stream, kernels::batch_norm_scratch_bytes(shape)), native_stream(stream));
}

CGDP_INSTANTIATE_CUDA_LAYER(BatchNormLayer)
template void BatchNormLayer<float>::backward_through_scale_cuda(const RunContext&, const float*,
                                                                 float*, float*, float*);
template void BatchNormLayer<double>::backward_through_scale_cuda(const RunContext&, const double*,
                                                                  double*, double*, double*);

}  // namespace cgdp
