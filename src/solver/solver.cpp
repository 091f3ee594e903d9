// One SGD step over the net's flat buffers, one parameter tensor at a time (lr/decay multipliers).
#include "cgdp/solver/solver.hpp"

namespace cgdp {

template <typename T>
Solver<T>::Solver(Net<T>& net, LrPolicy policy, SgdSettings sgd)
    : net_(net),
      policy_(std::move(policy)),
      sgd_(sgd),
      history_(net.device(), static_cast<size_t>(net.learnable_count()) * sizeof(T)) {}

template <typename T>
void Solver<T>::step(double grad_scale) {
  const double rate = learning_rate();
  auto data = net_.flat_data();
  auto diff = net_.flat_diff();
  auto hist = history();
  if (grad_scale != 1.0)
    for (T& g : diff) g = static_cast<T>(g * grad_scale);
  for (const ParamSlot& s : net_.param_slots()) {
    const auto off = static_cast<size_t>(s.offset), n = static_cast<size_t>(s.count);
    sgd_update(data.subspan(off, n), std::span<const T>(diff.subspan(off, n)), hist.subspan(off, n),
               static_cast<T>(rate * s.lr_mult), static_cast<T>(sgd_.momentum),
               static_cast<T>(sgd_.weight_decay * s.decay_mult));
  }
  ++iteration_;
}

template class Solver<float>;
template class Solver<double>;

}  // namespace cgdp
