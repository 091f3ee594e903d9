// The solver: owns the update history (laid out like the net's flat buffers, one or two buffers
// as the solver type needs) and applies one step per iteration with each parameter's lr_mult and
// decay_mult, after clipping the gradient if asked.
#pragma once

#include "cgdp/net/net.hpp"
#include "cgdp/solver/lr_policy.hpp"
#include "cgdp/solver/update_rule.hpp"

namespace cgdp {

template <typename T>
class Solver {
 public:
  Solver(Net<T>& net, LrPolicy policy, SolverSettings settings);

  // Issues on `stream` (the net's compute stream) the update of the parameters from the net's
  // gradients times `grad_scale` (1/(workers x micro-batches)), and advances the iteration now:
  // the learning rate is the one of the iteration the update was issued in. CPU: host loops on
  // the stream's thread; CUDA: kernels/solver_update.cu.
  void step(Stream& stream, double grad_scale = 1.0);
  // Loss scaling (loss_scale.hpp): each step first checks the summed gradient and, when it holds
  // an Inf or NaN, leaves parameters and history as they are. The iteration advances either way.
  void set_skip_non_finite(bool skip) { skip_non_finite_ = skip; }
  // Whether the last step was skipped; read once the stream has run it.
  bool last_step_skipped() const { return last_skipped_; }
  int64_t iteration() const { return iteration_; }
  void set_iteration(int64_t iteration) { iteration_ = iteration; }
  double learning_rate() const { return cgdp::learning_rate(policy_, iteration_); }
  const SolverSettings& settings() const { return settings_; }
  // History buffer `k` (< settings().histories()), element for element like Net::flat_data().
  std::span<T> history(int k = 0) {
    return {static_cast<T*>(history_[k].get()), static_cast<size_t>(net_.learnable_count())};
  }

 private:
  // A run of consecutive parameter tensors with the same multipliers: one update each.
  struct Range {
    int64_t offset = 0, count = 0;
    float lr_mult = 1, decay_mult = 1;
  };
  // grad_scale, times the clip's factor when clip_gradients is set and the norm is above it.
  double clipped_scale(double grad_scale, double sum_of_squares) const;
  // Whether the gradient's sum of squares is needed this step (clipping, or the finite check).
  bool needs_sum_of_squares() const { return settings_.clip_gradients > 0 || skip_non_finite_; }
  void update_on_host(double rate, double grad_scale, int64_t step);
  void update_on_device(Stream& stream, double rate, double grad_scale, int64_t step);

  Net<T>& net_;
  std::vector<Range> ranges_;
  LrPolicy policy_;
  SolverSettings settings_;
  DeviceBuffer history_[2];
  DeviceBuffer clip_sum_;  // CUDA: the gradient's sum of squares, for clip_gradients
  int64_t iteration_ = 0;
  bool skip_non_finite_ = false;
  bool last_skipped_ = false;  // written by the step on the stream, read after it
};

extern template class Solver<float>;
extern template class Solver<double>;

}  // namespace cgdp
