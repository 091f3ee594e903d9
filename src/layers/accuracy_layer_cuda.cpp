// Accuracy on CUDA: labels decoded on the device (class_labels_cuda.hpp), then one block counts
// the top-k hits (kernels/accuracy.cu).
#include "accuracy.cuh"
#include "cgdp/layers/accuracy_layer.hpp"
#include "class_labels_cuda.hpp"
#include "cuda_layer.hpp"

namespace cgdp {

namespace {

template <typename T>
struct AccuracyCuda final : LayerBackendState {
  explicit AccuracyCuda(Device& device) : labels(device) {}
  CudaLabels<T> labels;
};

}  // namespace

template <typename T>
void AccuracyLayer<T>::forward_cuda(const RunContext& ctx, const BlobVec<T>& bottom,
                                    const BlobVec<T>& top) {
  Stream& stream = layer_stream(*this, ctx);
  auto& s = this->template backend_state<AccuracyCuda<T>>(this->device());
  const int64_t* labels =
      s.labels.decode(*this, ca_, bottom[1]->data(), ignore_label_, ctx.sample_offset, stream);
  kernels::accuracy(bottom[0]->data(), labels, {ca_.outer, ca_.classes, ca_.inner},
                    this->param_.accuracy_param().top_k(), top[0]->mutable_data(),
                    native_stream(stream));
}

CGDP_INSTANTIATE_CUDA_FORWARD(AccuracyLayer)

}  // namespace cgdp
