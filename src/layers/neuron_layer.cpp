// The elementwise layers on the CPU: each element through its function, OpenMP over the blob.
#include "cgdp/layers/neuron_layer.hpp"

#include <cmath>
#include <type_traits>

namespace cgdp {

namespace {

// base^(shift + scale x) as Caffe's Exp and Log take it: base -1 means e; other bases must be > 0.
template <typename T, typename P>
T log_of_base(const P& p, const Layer<T>& layer, const char* field) {
  if (p.base() == -1.f) return T(1);
  if (!(p.base() > 0)) throw ModelError(cat("layer '", layer.name(), "' (", layer.type(), "): ", field,
                                            ".base must be > 0, or -1 for e (got ", p.base(), ")"));
  return static_cast<T>(std::log(static_cast<double>(p.base())));
}

template <typename T, template <typename> class F>
F<T> make_function(const Layer<T>& layer) {
  const proto::LayerParameter& lp = layer.param();
  if constexpr (std::is_same_v<F<T>, neuron::Power<T>>) {
    const auto& p = lp.power_param();
    return {p.power(), p.scale(), p.shift()};
  } else if constexpr (std::is_same_v<F<T>, neuron::Exp<T>>) {
    const auto& p = lp.exp_param();
    const T log_base = log_of_base(p, layer, "exp_param");
    return {log_base * p.scale(), p.shift() == 0 ? T(1) : static_cast<T>(std::exp(static_cast<double>(log_base) * p.shift()))};
  } else if constexpr (std::is_same_v<F<T>, neuron::Log<T>>) {
    const auto& p = lp.log_param();
    return {p.scale(), p.shift(), T(1) / log_of_base(p, layer, "log_param")};
  } else if constexpr (std::is_same_v<F<T>, neuron::ELU<T>>) {
    return {static_cast<T>(lp.elu_param().alpha())};
  } else if constexpr (std::is_same_v<F<T>, neuron::Threshold<T>>) {
    return {static_cast<T>(lp.threshold_param().threshold())};
  } else {
    return {};
  }
}

}  // namespace

template <typename T, template <typename> class F>
NeuronLayer<T, F>::NeuronLayer(const proto::LayerParameter& param, Device& device)
    : Layer<T>(param, device), fn_(make_function<T, F>(*this)) {}

template <typename T, template <typename> class F>
bool NeuronLayer<T, F>::can_backward_to(int) const {
  return !std::is_same_v<F<T>, neuron::Threshold<T>>;
}

template <typename T, template <typename> class F>
void NeuronLayer<T, F>::reshape(const BlobVec<T>& bottom, const BlobVec<T>& top) {
  bool needs_input = F<T>::kBackwardReadsX;
  if constexpr (std::is_same_v<F<T>, neuron::ELU<T>>) needs_input = fn_.alpha < 0;  // y's sign is not x's
  if (top[0] == bottom[0] && needs_input)
    this->fail("cannot run in place: its gradient needs the input, which the output would overwrite");
  top[0]->reshape_like(*bottom[0]);
}

template <typename T, template <typename> class F>
void NeuronLayer<T, F>::forward_cpu(const RunContext&, const BlobVec<T>& bottom, const BlobVec<T>& top) {
  const T* x = bottom[0]->data();
  T* y = top[0]->mutable_data();
  const int64_t n = bottom[0]->count();
  const F<T> f = fn_;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] = f.forward(x[i]);
}

template <typename T, template <typename> class F>
void NeuronLayer<T, F>::backward_cpu(const RunContext&, const BlobVec<T>& top,
                                     const std::vector<bool>& propagate_down, const BlobVec<T>& bottom) {
  if (!propagate_down[0]) return;
  const T* x = bottom[0]->data();  // in place: the output, which only functions that may run in place read
  const T* y = top[0]->data();
  const T* dy = top[0]->diff();
  T* dx = bottom[0]->mutable_diff();
  const int64_t n = bottom[0]->count();
  const F<T> f = fn_;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) dx[i] = f.backward(x[i], y[i], dy[i]);
}

#define CGDP_INSTANTIATE_NEURON(Fn)            \
  template class NeuronLayer<float, neuron::Fn>; \
  template class NeuronLayer<double, neuron::Fn>;
CGDP_INSTANTIATE_NEURON(Sigmoid)
CGDP_INSTANTIATE_NEURON(TanH)
CGDP_INSTANTIATE_NEURON(AbsVal)
CGDP_INSTANTIATE_NEURON(BNLL)
CGDP_INSTANTIATE_NEURON(Power)
CGDP_INSTANTIATE_NEURON(Exp)
CGDP_INSTANTIATE_NEURON(Log)
CGDP_INSTANTIATE_NEURON(ELU)
CGDP_INSTANTIATE_NEURON(Threshold)
#undef CGDP_INSTANTIATE_NEURON

}  // namespace cgdp
