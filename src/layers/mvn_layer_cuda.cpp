// MVN on CUDA: kernels/mvn.cu.
#include "cgdp/layers/mvn_layer.hpp"
#include "cuda_layer.hpp"
#include "mvn.cuh"

namespace cgdp {

template <typename T>
void MVNLayer<T>::forward_cuda(const RunContext& ctx, const BlobVec<T>& bottom, const BlobVec<T>& top) {
  const auto& p = this->param_.mvn_param();
  kernels::mvn_forward(bottom[0]->data(), rows_, dim_, p.normalize_variance(), p.eps(), top[0]->mutable_data(),
                       scale_->mutable_data(), native_stream(layer_stream(*this, ctx)));
}

template <typename T>
void MVNLayer<T>::backward_cuda(const RunContext& ctx, const BlobVec<T>& top, const std::vector<bool>& propagate_down,
                                const BlobVec<T>& bottom) {
  if (!propagate_down[0]) return;
  kernels::mvn_backward(top[0]->data(), top[0]->diff(), scale_->data(), rows_, dim_,
                        this->param_.mvn_param().normalize_variance(), bottom[0]->mutable_diff(),
                        native_stream(layer_stream(*this, ctx)));
}

CGDP_INSTANTIATE_CUDA_LAYER(MVNLayer)

}  // namespace cgdp
