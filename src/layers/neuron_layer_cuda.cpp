// The elementwise layers on CUDA: their element functions as one kernel each way (kernels/neuron.cu).
#include "cgdp/layers/neuron_layer.hpp"
#include "cuda_layer.hpp"
#include "neuron.cuh"

namespace cgdp {

template <typename T, template <typename> class F>
void NeuronLayer<T, F>::forward_cuda(const RunContext& ctx, const BlobVec<T>& bottom, const BlobVec<T>& top) {
  kernels::neuron_forward(bottom[0]->data(), top[0]->mutable_data(), bottom[0]->count(), fn_,
                          native_stream(layer_stream(*this, ctx)));
}

template <typename T, template <typename> class F>
void NeuronLayer<T, F>::backward_cuda(const RunContext& ctx, const BlobVec<T>& top,
                                      const std::vector<bool>& propagate_down, const BlobVec<T>& bottom) {
  if (!propagate_down[0]) return;
  kernels::neuron_backward(bottom[0]->data(), top[0]->data(), top[0]->diff(), bottom[0]->mutable_diff(),
                           bottom[0]->count(), fn_, native_stream(layer_stream(*this, ctx)));
}

#define CGDP_NEURON_CUDA(Fn, T)                                                                       \
  template void NeuronLayer<T, neuron::Fn>::forward_cuda(const RunContext&, const BlobVec<T>&,        \
                                                         const BlobVec<T>&);                          \
  template void NeuronLayer<T, neuron::Fn>::backward_cuda(const RunContext&, const BlobVec<T>&,       \
                                                          const std::vector<bool>&, const BlobVec<T>&);
#define CGDP_NEURON_CUDA_BOTH(Fn) CGDP_NEURON_CUDA(Fn, float) CGDP_NEURON_CUDA(Fn, double)
CGDP_NEURON_CUDA_BOTH(Sigmoid)
CGDP_NEURON_CUDA_BOTH(TanH)
CGDP_NEURON_CUDA_BOTH(AbsVal)
CGDP_NEURON_CUDA_BOTH(BNLL)
CGDP_NEURON_CUDA_BOTH(Power)
CGDP_NEURON_CUDA_BOTH(Exp)
CGDP_NEURON_CUDA_BOTH(Log)
CGDP_NEURON_CUDA_BOTH(ELU)
CGDP_NEURON_CUDA_BOTH(Threshold)

}  // namespace cgdp
