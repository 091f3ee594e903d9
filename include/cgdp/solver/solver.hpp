// The solver: owns the momentum history (laid out like the net's flat buffers) and applies one
// SGD step per iteration with each parameter's lr_mult and decay_mult.
#pragma once

#include "cgdp/net/net.hpp"
#include "cgdp/solver/lr_policy.hpp"
#include "cgdp/solver/sgd.hpp"

namespace cgdp {

template <typename T>
class Solver {
 public:
  Solver(Net<T>& net, LrPolicy policy, SgdSettings sgd);

  // Updates the parameters from the net's gradients times `grad_scale` (1/micro-batches when
  // gradients were accumulated), then advances the iteration.
  void step(double grad_scale = 1.0);
  int64_t iteration() const { return iteration_; }
  void set_iteration(int64_t iteration) { iteration_ = iteration; }
  double learning_rate() const { return cgdp::learning_rate(policy_, iteration_); }
  // Momentum history, element for element like Net::flat_data().
  std::span<T> history() { return {static_cast<T*>(history_.get()), static_cast<size_t>(net_.learnable_count())}; }

 private:
  Net<T>& net_;
  LrPolicy policy_;
  SgdSettings sgd_;
  DeviceBuffer history_;
  int64_t iteration_ = 0;
};

extern template class Solver<float>;
extern template class Solver<double>;

}  // namespace cgdp
