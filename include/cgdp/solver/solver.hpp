// The solver: owns the update history (laid out like the net's flat buffers, one or two buffers
// as the solver type needs) and applies one step per iteration with each parameter's lr_mult and
// decay_mult, after clipping the gradient if asked.
#pragma once

#include <memory>

#include "cgdp/net/net.hpp"
#include "cgdp/solver/host_history.hpp"
#include "cgdp/solver/lr_policy.hpp"
#include "cgdp/solver/update_rule.hpp"

namespace cgdp {

// Where the history waits between steps: on the net's device, or (offload, when the run does not
// fit its budget) in pinned host memory, staged through the device at each step (host_history.hpp).
enum class HistoryPlace { Device, Host };

template <typename T>
class Solver {
 public:
  // `worker` names the history's copy streams when it is on the host.
  Solver(Net<T>& net, LrPolicy policy, SolverSettings settings,
         HistoryPlace place = HistoryPlace::Device, int worker = 0);

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
  // History buffer `k` (< settings().histories()), element for element like Net::flat_data(); in
  // host memory when history_place() is Host (read it once the compute stream has run the step).
  std::span<T> history(int k = 0) {
    if (host_history_) return host_history_->history(k);
    return {static_cast<T*>(history_[k].get()), static_cast<size_t>(net_.learnable_count())};
  }
  // Host also when the net streams weights: they are updated through the history's stage.
  HistoryPlace history_place() const {
    return host_history_ ? HistoryPlace::Host : HistoryPlace::Device;
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
  // Sets last_skipped_ and step_scale_ (grad_scale, clipped) from the gradient; on `stream`'s
  // thread (CPU) or synchronously after a kernel (CUDA).
  void check_gradient(Stream& stream, double grad_scale);
  // Updates elements [offset, offset + count), whose history starts at `h` and `h2` (null with
  // one buffer), with step_scale_: the parts of every range they cover.
  // `data` and `diff` point at element `offset` (the flat buffers, or a streamed piece's stage).
  void update_elements(Stream& stream, int64_t offset, int64_t count, T* data, const T* diff, T* h,
                       T* h2, double rate, int64_t step);
  void update_range(Stream& stream, const Range& r, T* data, const T* diff, T* h, T* h2,
                    double rate, int64_t step);

  Net<T>& net_;
  std::vector<Range> ranges_;
  LrPolicy policy_;
  SolverSettings settings_;
  DeviceBuffer history_[2];
  std::unique_ptr<HostHistory<T>> host_history_;  // instead of history_ when the place is Host
  DeviceBuffer clip_sum_;  // CUDA: the gradient's sum of squares, for clip_gradients
  int64_t iteration_ = 0;
  bool skip_non_finite_ = false;
  bool last_skipped_ = false;  // written by the step on the stream, read after it
  double step_scale_ = 1;      // likewise: the step's gradient scale, clipped
};

extern template class Solver<float>;
extern template class Solver<double>;

}  // namespace cgdp
