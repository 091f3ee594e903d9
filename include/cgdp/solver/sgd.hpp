// Caffe's SGD step (momentum + L2 weight decay) on flat arrays, and its validated settings.
#pragma once

#include <span>
#include <string>

#include "cgdp.pb.h"

namespace cgdp {

// Solver-wide SGD settings; a parameter tensor scales them by its ParamSpec lr_mult/decay_mult.
struct SgdSettings {
  float momentum = 0.f;
  float weight_decay = 0.f;
};

// Validates momentum in [0, 1) and weight_decay >= 0; throws UsageError naming `source`.
SgdSettings make_sgd_settings(const proto::SolverParameter& solver,
                              const std::string& source = "solver");

// One SGD step for one parameter tensor, element by element (Caffe's SGDSolver):
//   g = diff + decay * data;  history = momentum * history + lr * g;  data -= history.
// Pass lr = rate * lr_mult and decay = weight_decay * decay_mult. Unlike Caffe, `diff` is left
// as it was (Caffe overwrites it with g, then with the update); the net zeroes diffs before the
// next backward, so nothing reads it in between. The three spans must have equal sizes.
void sgd_update(std::span<float> data, std::span<const float> diff, std::span<float> history,
                float lr, float momentum, float decay);
void sgd_update(std::span<double> data, std::span<const double> diff, std::span<double> history,
                double lr, double momentum, double decay);

}  // namespace cgdp
