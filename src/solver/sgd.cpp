// SGD with momentum and L2 weight decay: one fused pass over data, diff and history.
#include "cgdp/solver/sgd.hpp"

#include <cmath>
#include <cstddef>

#include "cgdp/core/error.hpp"

namespace cgdp {

namespace {

// Below this many elements a parallel region costs more than the update itself.
constexpr std::ptrdiff_t kParallelMin = 1 << 15;

template <typename T>
void update(std::span<T> data, std::span<const T> diff, std::span<T> history, T lr, T momentum,
            T decay) {
  if (diff.size() != data.size() || history.size() != data.size())
    throw Error(cat("sgd_update: sizes differ (data ", data.size(), ", diff ", diff.size(),
                    ", history ", history.size(), ")"));
  const std::ptrdiff_t n = static_cast<std::ptrdiff_t>(data.size());
  T* __restrict w = data.data();
  const T* __restrict g = diff.data();
  T* __restrict h = history.data();
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
  for (std::ptrdiff_t i = 0; i < n; ++i) {
    const T v = momentum * h[i] + lr * (g[i] + decay * w[i]);
    h[i] = v;
    w[i] -= v;
  }
}

}  // namespace

SgdSettings make_sgd_settings(const proto::SolverParameter& solver, const std::string& source) {
  const float momentum = solver.momentum(), decay = solver.weight_decay();
  if (!std::isfinite(momentum) || momentum < 0 || momentum >= 1)
    throw UsageError(cat(source, ": momentum must be in [0, 1) (got ", momentum, ")"));
  if (!std::isfinite(decay) || decay < 0)
    throw UsageError(cat(source, ": weight_decay must be >= 0 (got ", decay, ")"));
  return {momentum, decay};
}

void sgd_update(std::span<float> data, std::span<const float> diff, std::span<float> history,
                float lr, float momentum, float decay) {
  update(data, diff, history, lr, momentum, decay);
}

void sgd_update(std::span<double> data, std::span<const double> diff, std::span<double> history,
                double lr, double momentum, double decay) {
  update(data, diff, history, lr, momentum, decay);
}

}  // namespace cgdp
