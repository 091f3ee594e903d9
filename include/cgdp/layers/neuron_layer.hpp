// Caffe's elementwise layers (Sigmoid, TanH, AbsVal, BNLL, Power, Exp, Log, ELU, Threshold): one
// layer class over the element functions of neuron_functions.hpp. Forward and backward run those
// functions over every element: host loops here (neuron_layer.cpp), a kernel on CUDA
// (neuron_layer_cuda.cpp, kernels/neuron.cu).
#pragma once

#include "cgdp/layers/layer.hpp"
#include "cgdp/layers/neuron_functions.hpp"

namespace cgdp {

template <typename T, template <typename> class F>
class NeuronLayer final : public Layer<T> {
 public:
  bool can_run_in_place() const override { return true; }
  // Each element alike and alone: any layout.
  bool handles_channel_block(bool, int64_t) const override { return true; }
  // Reads the function's settings from its *_param; ModelError for values Caffe refuses.
  NeuronLayer(const proto::LayerParameter& param, Device& device);
  void reshape(const BlobVec<T>& bottom, const BlobVec<T>& top) override;
  // Threshold is a step: no gradient, as in Caffe.
  bool can_backward_to(int) const override;

 protected:
  void forward_cpu(const RunContext& ctx, const BlobVec<T>& bottom, const BlobVec<T>& top) override;
  void backward_cpu(const RunContext& ctx, const BlobVec<T>& top,
                    const std::vector<bool>& propagate_down, const BlobVec<T>& bottom) override;
#ifdef CGDP_HAVE_CUDA
  void forward_cuda(const RunContext& ctx, const BlobVec<T>& bottom, const BlobVec<T>& top) override;
  void backward_cuda(const RunContext& ctx, const BlobVec<T>& top,
                     const std::vector<bool>& propagate_down, const BlobVec<T>& bottom) override;
#endif

 private:
  F<T> fn_;
};

template <typename T> using SigmoidLayer = NeuronLayer<T, neuron::Sigmoid>;
template <typename T> using TanHLayer = NeuronLayer<T, neuron::TanH>;
template <typename T> using AbsValLayer = NeuronLayer<T, neuron::AbsVal>;
template <typename T> using BNLLLayer = NeuronLayer<T, neuron::BNLL>;
template <typename T> using PowerLayer = NeuronLayer<T, neuron::Power>;
template <typename T> using ExpLayer = NeuronLayer<T, neuron::Exp>;
template <typename T> using LogLayer = NeuronLayer<T, neuron::Log>;
template <typename T> using ELULayer = NeuronLayer<T, neuron::ELU>;
template <typename T> using ThresholdLayer = NeuronLayer<T, neuron::Threshold>;

}  // namespace cgdp
