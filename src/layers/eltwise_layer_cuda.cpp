// Eltwise on CUDA: kernels/eltwise.cu, given the bottoms' pointers by value.
#include "cgdp/layers/eltwise_layer.hpp"
#include "cuda_layer.hpp"
#include "eltwise.cuh"

namespace cgdp {

namespace {

template <typename T>
kernels::EltwiseInputs<T> inputs(const Layer<T>& layer, const BlobVec<T>& bottom,
                                 const std::vector<T>& coeff) {
  if (bottom.size() > static_cast<size_t>(kernels::kMaxEltwiseBottoms))
    throw_layer_error<ModelError>(layer, cat("has ", bottom.size(), " bottoms; on CUDA at most ",
                                             kernels::kMaxEltwiseBottoms));
  kernels::EltwiseInputs<T> in{};
  in.count = static_cast<int>(bottom.size());
  for (int b = 0; b < in.count; ++b) {
    in.x[b] = bottom[b]->data();
    in.coeff[b] = coeff[b];
  }
  return in;
}

kernels::EltwiseOp kernel_op(proto::EltwiseParameter::EltwiseOp op) {
  switch (op) {
    case proto::EltwiseParameter::PROD: return kernels::EltwiseOp::Prod;
    case proto::EltwiseParameter::MAX: return kernels::EltwiseOp::Max;
    default: return kernels::EltwiseOp::Sum;
  }
}

}  // namespace

template <typename T>
void EltwiseLayer<T>::forward_cuda(const RunContext& ctx, const BlobVec<T>& bottom,
                                   const BlobVec<T>& top) {
  Stream& stream = layer_stream(*this, ctx);
  kernels::eltwise_forward(inputs(*this, bottom, coeff_), kernel_op(op_), top[0]->count(),
                           top[0]->mutable_data(), max_index_.mutable_data(), native_stream(stream));
}

template <typename T>
void EltwiseLayer<T>::backward_cuda(const RunContext& ctx, const BlobVec<T>& top,
                                    const std::vector<bool>& propagate_down,
                                    const BlobVec<T>& bottom) {
  Stream& stream = layer_stream(*this, ctx);
  const kernels::EltwiseInputs<T> in = inputs(*this, bottom, coeff_);
  for (int b = 0; b < in.count; ++b)
    if (propagate_down[b])
      kernels::eltwise_backward(in, kernel_op(op_), b, top[0]->count(), top[0]->diff(),
                                max_index_.data(), bottom[b]->mutable_diff(), native_stream(stream));
}

CGDP_INSTANTIATE_CUDA_LAYER(EltwiseLayer)

}  // namespace cgdp
