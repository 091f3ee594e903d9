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

  // Issues on `stream` (the net's compute stream) the update of the parameters from the net's
  // gradients times `grad_scale` (1/(workers x micro-batches)), and advances the iteration now:
  // the learning rate is the one of the iteration the update was issued in. CPU: host loops on
  // the stream's thread; CUDA: kernels/sgd_update.cu.
  void step(Stream& stream, double grad_scale = 1.0);
  int64_t iteration() const { return iteration_; }
  void set_iteration(int64_t iteration) { iteration_ = iteration; }
  double learning_rate() const { return cgdp::learning_rate(policy_, iteration_); }
  // Momentum history, element for element like Net::flat_data().
  std::span<T> history() { return {static_cast<T*>(history_.get()), static_cast<size_t>(net_.learnable_count())}; }

 private:
  // A run of consecutive parameter tensors with the same multipliers: one update each.
  struct Range {
    int64_t offset = 0, count = 0;
    float lr_mult = 1, decay_mult = 1;
  };
  void update_on_host(double rate, double grad_scale);

  Net<T>& net_;
  std::vector<Range> ranges_;
  LrPolicy policy_;
  SgdSettings sgd_;
  DeviceBuffer history_;
  int64_t iteration_ = 0;
};

extern template class Solver<float>;
extern template class Solver<double>;

}  // namespace cgdp
