// LRN on CUDA: ACROSS_CHANNELS with a window up to lrn::kMaxColumnWindow runs lrn_column.hpp's
// forward and backward, a column per thread: the backward needs only the input, so the top need
// not be kept, and in place or not the forward is one formula, the backward's own (cuDNN's LRN
// forward gave other bits than the backward's and than itself in place). Else kernels/lrn.cu,
// the CPU layer's formulas (WITHIN_CHANNEL too), with powf where the CPU takes beta = 0.75's
// square roots: equal to rounding, not to the bit.
#include "cgdp/layers/lrn_column.hpp"
#include "cgdp/layers/lrn_layer.hpp"
#include "cuda_layer.hpp"
#include "lrn.cuh"

namespace cgdp {

namespace {

struct LrnCuda final : LayerBackendState {
  DeviceBuffer scale;  // the kernels' scale, kept from forward for backward
  DeviceBuffer work;
};

}  // namespace

template <typename T>
void LRNLayer<T>::forward_cuda(const RunContext& ctx, const BlobVec<T>& bottom,
                               const BlobVec<T>& top) {
  Stream& stream = layer_stream(*this, ctx);
  if (this->cuda_runs_columns())
    return kernels::lrn_across_forward(bottom[0]->data(), top[0]->mutable_data(),
                                       {shape_[0], shape_[1], shape_[2], shape_[3], size_, true},
                                       alpha_over_n_, k_, beta_, native_stream(stream));
  auto& s = this->template backend_state<LrnCuda>();
  const int64_t n = bottom[0]->count();
  T* scale = ensure_buffer<T>(s.scale, this->device(), stream, n);
  kernels::lrn_forward(bottom[0]->data(), scale, top[0]->mutable_data(),
                       {shape_[0], shape_[1], shape_[2], shape_[3], size_, across_channels_},
                       alpha_over_n_, k_, beta_, native_stream(stream));
}

template <typename T>
void LRNLayer<T>::backward_cuda(const RunContext& ctx, const BlobVec<T>& top,
                                const std::vector<bool>& propagate_down, const BlobVec<T>& bottom) {
  if (!propagate_down[0]) return;
  Stream& stream = layer_stream(*this, ctx);
  const kernels::LrnShape shape{shape_[0], shape_[1], shape_[2],
                                shape_[3], size_,     across_channels_};
  if (this->cuda_runs_columns()) {
    if (const uint16_t* packed = bottom[0]->packed_values())  // x's bf16 copy: the net kept only it
      return kernels::lrn_across_backward_bf16(packed, top[0]->diff(), bottom[0]->mutable_diff(),
                                               shape, alpha_over_n_, k_, beta_,
                                               native_stream(stream));
    return kernels::lrn_across_backward(bottom[0]->data(), top[0]->diff(),
                                        bottom[0]->mutable_diff(), shape, alpha_over_n_, k_, beta_,
                                        native_stream(stream));
  }
  auto& s = this->template backend_state<LrnCuda>();
  T* work = ensure_buffer<T>(s.work, this->device(), stream, bottom[0]->count());
  kernels::lrn_backward(bottom[0]->data(), static_cast<const T*>(s.scale.get()), top[0]->diff(),
                        work, bottom[0]->mutable_diff(), shape, alpha_over_n_, beta_,
                        native_stream(stream));
}

CGDP_INSTANTIATE_CUDA_LAYER(LRNLayer)

}  // namespace cgdp
