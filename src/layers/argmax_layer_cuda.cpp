// ArgMax on CUDA: kernels/argmax.cu.
#include "argmax.cuh"
#include "cgdp/layers/argmax_layer.hpp"
#include "cuda_layer.hpp"

namespace cgdp {

template <typename T>
void ArgMaxLayer<T>::forward_cuda(const RunContext& ctx, const BlobVec<T>& bottom, const BlobVec<T>& top) {
  kernels::argmax_forward(bottom[0]->data(), {g_.rows, g_.dim, g_.stride, g_.top_k, g_.has_axis, g_.out_max_val},
                          top[0]->mutable_data(), native_stream(layer_stream(*this, ctx)));
}

CGDP_INSTANTIATE_CUDA_FORWARD(ArgMaxLayer)

}  // namespace cgdp
