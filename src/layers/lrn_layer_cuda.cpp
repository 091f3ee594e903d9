// LRN on CUDA: cuDNN's cross-channel LRN forward where it applies (ACROSS_CHANNELS, local_size
// 1..16, k and beta in cuDNN's range; cuDNN divides alpha by local_size as Caffe does), or in place
// lrn_column.hpp's forward, and a backward from the input alone (lrn_column.hpp), so that top need
// not be kept; else kernels/lrn.cu, which computes exactly what the CPU layer computes
// (WITHIN_CHANNEL too).
#include "cgdp/layers/lrn_column.hpp"
#include "cgdp/layers/lrn_layer.hpp"
#include "cuda_layer.hpp"
#include "lrn.cuh"

namespace cgdp {

namespace {

struct LrnCuda final : LayerBackendState {
  LrnDescriptor lrn;
  TensorDescriptor tensor;
  Shape shape;       // what `tensor` describes
  DeviceBuffer scale;  // the kernels' scale, kept from forward for backward
  DeviceBuffer work;
};

// LRNLayer::cuda_runs_cudnn states cuDNN's limits without cudnn.h.
static_assert(CUDNN_LRN_MIN_N == 1 && CUDNN_LRN_MAX_N == 16, "cuda_runs_cudnn's window limits");
static_assert(lrn::kMaxColumnWindow >= CUDNN_LRN_MAX_N - 1,
              "the backward's rings hold any odd window");
static_assert(CUDNN_LRN_MIN_K == 1e-5 && CUDNN_LRN_MIN_BETA == 0.01,
              "cuda_runs_cudnn's k and beta");

template <typename T>
void describe(const Layer<T>& layer, LrnCuda& s, const Shape& shape) {
  if (s.shape == shape) return;
  const auto& p = layer.param().lrn_param();
  CUDNN_CHECK(cudnnSetLRNDescriptor(s.lrn.get(), p.local_size(), p.alpha(), p.beta(), p.k()));
  set_tensor(layer, s.tensor, shape[0], shape[1], shape[2], shape[3]);
  s.shape = shape;
}

}  // namespace

template <typename T>
void LRNLayer<T>::forward_cuda(const RunContext& ctx, const BlobVec<T>& bottom,
                               const BlobVec<T>& top) {
  Stream& stream = layer_stream(*this, ctx);
  auto& s = this->template backend_state<LrnCuda>();
  if (this->cuda_runs_cudnn() && bottom[0]->data() == top[0]->data())  // cuDNN's may not
    return kernels::lrn_across_forward(bottom[0]->data(), top[0]->mutable_data(),
                                       {shape_[0], shape_[1], shape_[2], shape_[3], size_, true},
                                       alpha_over_n_, k_, beta_, native_stream(stream));
  if (this->cuda_runs_cudnn()) {
    describe(*this, s, shape_);
    const T one = 1, zero = 0;
    CUDNN_CHECK(cudnnLRNCrossChannelForward(cudnn_handle(stream), s.lrn.get(),
                                            CUDNN_LRN_CROSS_CHANNEL_DIM1, &one, s.tensor.get(),
                                            bottom[0]->data(), &zero, s.tensor.get(),
                                            top[0]->mutable_data()));
    return;
  }
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
  auto& s = this->template backend_state<LrnCuda>();
  const kernels::LrnShape shape{shape_[0], shape_[1], shape_[2],
                                shape_[3], size_,     across_channels_};
  if (this->cuda_runs_cudnn()) {  // cuDNN's backward would read top: compute from x alone instead
    if (const uint16_t* packed = bottom[0]->packed_values())  // x's bf16 copy: the net kept only it
      return kernels::lrn_across_backward_bf16(packed, top[0]->diff(), bottom[0]->mutable_diff(),
                                               shape, alpha_over_n_, k_, beta_,
                                               native_stream(stream));
    return kernels::lrn_across_backward(bottom[0]->data(), top[0]->diff(),
                                        bottom[0]->mutable_diff(), shape, alpha_over_n_, k_, beta_,
                                        native_stream(stream));
  }
  T* work = ensure_buffer<T>(s.work, this->device(), stream, bottom[0]->count());
  kernels::lrn_backward(bottom[0]->data(), static_cast<const T*>(s.scale.get()), top[0]->diff(),
                        work, bottom[0]->mutable_diff(), shape, alpha_over_n_, beta_,
                        native_stream(stream));
}

CGDP_INSTANTIATE_CUDA_LAYER(LRNLayer)

}  // namespace cgdp
