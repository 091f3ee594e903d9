// Pooling on CUDA: own kernels (kernels/pooling.cu), not cuDNN's: Caffe rounds the output size
// up, which cuDNN's symmetric padding cannot express, and its AVE divisor and first-maximum rule
// at those edges differ from cuDNN's; the kernels reproduce the CPU layer exactly.
#include "cgdp/layers/pooling_layer.hpp"
#include "cuda_layer.hpp"
#include "pooling.cuh"

namespace cgdp {

template <typename T>
void PoolingLayer<T>::forward_cuda(const RunContext& ctx, const BlobVec<T>& bottom,
                                   const BlobVec<T>& top) {
  Stream& stream = layer_stream(*this, ctx);
  const kernels::PoolShape shape{bottom[0]->count(0, 2), height_, width_, pooled_h_, pooled_w_,
                                 kernel_h_, kernel_w_, stride_h_, stride_w_, pad_h_, pad_w_};
  if (!max_) {
    kernels::ave_pool_forward(bottom[0]->data(), top[0]->mutable_data(), shape, native_stream(stream));
    return;
  }
  // MAX: each output's maximum's place in its window; a TEST net keeps none.
  with_code([&]<typename Code>() {
    Code* argmax = this->forward_only_ ? nullptr : static_cast<Code*>(codes());
    kernels::max_pool_forward(bottom[0]->data(), top[0]->mutable_data(), argmax, shape,
                              native_stream(stream));
  });
}

template <typename T>
void PoolingLayer<T>::backward_cuda(const RunContext& ctx, const BlobVec<T>& top,
                                    const std::vector<bool>& propagate_down,
                                    const BlobVec<T>& bottom) {
  if (!propagate_down[0]) return;
  Stream& stream = layer_stream(*this, ctx);
  const kernels::PoolShape shape{bottom[0]->count(0, 2), height_, width_, pooled_h_, pooled_w_,
                                 kernel_h_, kernel_w_, stride_h_, stride_w_, pad_h_, pad_w_};
  if (!max_) {
    kernels::ave_pool_backward(top[0]->diff(), bottom[0]->mutable_diff(), shape, native_stream(stream));
    return;
  }
  with_code([&]<typename Code>() {
    kernels::max_pool_backward(top[0]->diff(), static_cast<const Code*>(codes()),
                               bottom[0]->mutable_diff(), shape, native_stream(stream));
  });
}

CGDP_INSTANTIATE_CUDA_LAYER(PoolingLayer)

}  // namespace cgdp
