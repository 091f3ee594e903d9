// Caffe's solver types (SGD, Nesterov, AdaGrad, RMSProp, AdaDelta, Adam) as elementwise update
// rules over flat arrays, with their validated settings. Every rule reads only its own element's
// gradient, parameter and history, so each worker applying it to the summed gradient gets the
// same bits as any other: the host sum of cgdp needs nothing more.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "cgdp.pb.h"

namespace cgdp {

enum class SolverType { kSgd, kNesterov, kAdaGrad, kRmsProp, kAdaDelta, kAdam };

const char* to_string(SolverType type);

// Solver-wide settings; a parameter tensor scales the rate and the decay by its lr_mult and
// decay_mult.
struct SolverSettings {
  SolverType type = SolverType::kSgd;
  // Doubles, so that a float64 net's update is exact; a float net rounds them to float, which
  // gives back the solver file's values exactly.
  double momentum = 0;        // SGD, Nesterov; AdaDelta's decay; Adam's beta1
  double weight_decay = 0;    // L2, added to the gradient before the rule (Caffe's Regularize)
  double delta = 1e-8;        // AdaGrad, RMSProp, AdaDelta, Adam: keeps the denominators off 0
  double momentum2 = 0.999;   // Adam's beta2
  double rms_decay = 0.99;    // RMSProp
  // > 0: the gradient is scaled down to this L2 norm first. Caffe measures the norm of the
  // gradient summed over its iter_size micro-batches (and averaged over GPUs): so does cgdp.
  double clip_gradients = -1;
  int iter_size = 1;
  // History buffers per parameter: 2 for AdaDelta (squared gradients, squared updates) and Adam
  // (first and second moments), else 1.
  int histories() const { return type == SolverType::kAdaDelta || type == SolverType::kAdam ? 2 : 1; }
};

// Reads `type` (or the older `solver_type`) and the fields the type uses; throws UsageError naming
// `source` and the field for a value Caffe would refuse.
SolverSettings make_solver_settings(const proto::SolverParameter& solver, const std::string& source = "solver");

// One step for one run of elements with the same multipliers, as Caffe's ComputeUpdateValue after
// Regularize: g = diff * grad_scale + decay * data, then the rule, then data -= update.
//   SGD       h = momentum h + lr g;                 update = h
//   Nesterov  h' = momentum h + lr g;                update = (1 + momentum) h' - momentum h
//   AdaGrad   h += g^2;                              update = lr g / (sqrt(h) + delta)
//   RMSProp   h = rms_decay h + (1 - rms_decay) g^2; update = lr g / (sqrt(h) + delta)
//   AdaDelta  h = m h + (1 - m) g^2;  u = g sqrt((h2 + delta) / (h + delta));
//             h2 = m h2 + (1 - m) u^2;               update = lr u
//   Adam      h = b1 h + (1 - b1) g;  h2 = b2 h2 + (1 - b2) g^2;
//             update = lr sqrt(1 - b2^t) / (1 - b1^t) h / (sqrt(h2) + delta), t = step (1-based)
// `diff` is only read. `history2` is empty unless the rule keeps two histories.
struct StepScalars {
  double lr = 0, decay = 0, grad_scale = 1;
  int64_t step = 1;  // Adam's t
};
void solver_update(const SolverSettings& s, const StepScalars& k, std::span<float> data,
                   std::span<const float> diff, std::span<float> history, std::span<float> history2);
void solver_update(const SolverSettings& s, const StepScalars& k, std::span<double> data,
                   std::span<const double> diff, std::span<double> history, std::span<double> history2);

// Caffe's SGD step alone (the tests' and benches' short form of solver_update).
void sgd_update(std::span<float> data, std::span<const float> diff, std::span<float> history,
                float lr, float momentum, float decay);
void sgd_update(std::span<double> data, std::span<const double> diff, std::span<double> history,
                double lr, double momentum, double decay);

}  // namespace cgdp
