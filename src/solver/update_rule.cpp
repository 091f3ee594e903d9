// Caffe's update rules, one fused pass per run of elements; the CUDA twin is kernels/solver_update.cu.
#include "cgdp/solver/update_rule.hpp"

#include <cmath>
#include <cstddef>

#include "cgdp/core/error.hpp"

namespace cgdp {

namespace {

// Below this many elements a parallel region costs more than the update itself.
constexpr std::ptrdiff_t kParallelMin = 1 << 15;

SolverType parse_type(const proto::SolverParameter& s, const std::string& source) {
  // Caffe's older enum, used when `type` is not given (Caffe's UpgradeSolverType).
  if (!s.has_type() && s.has_solver_type()) {
    switch (s.solver_type()) {
      case proto::SolverParameter::SGD: return SolverType::kSgd;
      case proto::SolverParameter::NESTEROV: return SolverType::kNesterov;
      case proto::SolverParameter::ADAGRAD: return SolverType::kAdaGrad;
      case proto::SolverParameter::RMSPROP: return SolverType::kRmsProp;
      case proto::SolverParameter::ADADELTA: return SolverType::kAdaDelta;
      case proto::SolverParameter::ADAM: return SolverType::kAdam;
    }
  }
  const std::string& t = s.type();
  if (t == "SGD") return SolverType::kSgd;
  if (t == "Nesterov") return SolverType::kNesterov;
  if (t == "AdaGrad") return SolverType::kAdaGrad;
  if (t == "RMSProp") return SolverType::kRmsProp;
  if (t == "AdaDelta") return SolverType::kAdaDelta;
  if (t == "Adam") return SolverType::kAdam;
  throw UsageError(cat(source, ": unknown solver type \"", t,
                       "\" (known: SGD, Nesterov, AdaGrad, RMSProp, AdaDelta, Adam)"));
}

void require(bool ok, const std::string& source, const std::string& what) {
  if (!ok) throw UsageError(cat(source, ": ", what));
}

template <typename T>
void check_sizes(std::span<T> data, std::span<const T> diff, std::span<T> h, std::span<T> h2, bool two) {
  if (diff.size() != data.size() || h.size() != data.size() || (two && h2.size() != data.size()))
    throw Error(cat("solver_update: sizes differ (data ", data.size(), ", diff ", diff.size(), ", history ",
                    h.size(), ", second history ", h2.size(), ")"));
}

template <typename T>
void update(const SolverSettings& s, const StepScalars& k, std::span<T> data, std::span<const T> diff,
            std::span<T> history, std::span<T> history2) {
  check_sizes(data, diff, history, history2, s.histories() == 2);
  const std::ptrdiff_t n = static_cast<std::ptrdiff_t>(data.size());
  T* __restrict w = data.data();
  const T* __restrict d = diff.data();
  T* __restrict h = history.data();
  T* __restrict h2 = history2.data();
  const T lr = static_cast<T>(k.lr), decay = static_cast<T>(k.decay), momentum = static_cast<T>(s.momentum);
  const T delta = static_cast<T>(s.delta);
  const double scale = k.grad_scale;
  // The gradient is scaled in double and rounded to T, as the CUDA kernel does. Always: a scale of
  // 1 gives the same T back, and one loop (not one per case) keeps the compiler's FMA contractions
  // the same for every scale, so N workers' 1/N-scaled sums match one worker's bits.
  auto grad = [&](std::ptrdiff_t i) { return static_cast<T>(static_cast<double>(d[i]) * scale) + decay * w[i]; };
  switch (s.type) {
    case SolverType::kSgd:
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
      for (std::ptrdiff_t i = 0; i < n; ++i) {
        const T v = momentum * h[i] + lr * grad(i);
        h[i] = v;
        w[i] -= v;
      }
      break;
    case SolverType::kNesterov:
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
      for (std::ptrdiff_t i = 0; i < n; ++i) {
        const T before = h[i];
        const T v = momentum * before + lr * grad(i);
        h[i] = v;
        w[i] -= (1 + momentum) * v - momentum * before;
      }
      break;
    case SolverType::kAdaGrad:
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
      for (std::ptrdiff_t i = 0; i < n; ++i) {
        const T g = grad(i);
        h[i] += g * g;
        w[i] -= lr * g / (std::sqrt(h[i]) + delta);
      }
      break;
    case SolverType::kRmsProp: {
      const T decay_rate = static_cast<T>(s.rms_decay);
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
      for (std::ptrdiff_t i = 0; i < n; ++i) {
        const T g = grad(i);
        h[i] = decay_rate * h[i] + (1 - decay_rate) * g * g;
        w[i] -= lr * g / (std::sqrt(h[i]) + delta);
      }
      break;
    }
    case SolverType::kAdaDelta:
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
      for (std::ptrdiff_t i = 0; i < n; ++i) {
        const T g = grad(i);
        h[i] = momentum * h[i] + (1 - momentum) * g * g;
        const T u = g * std::sqrt((h2[i] + delta) / (h[i] + delta));
        h2[i] = momentum * h2[i] + (1 - momentum) * u * u;
        w[i] -= lr * u;
      }
      break;
    case SolverType::kAdam: {
      const T beta2 = static_cast<T>(s.momentum2);
      const double t = static_cast<double>(k.step);
      const T rate = static_cast<T>(k.lr * std::sqrt(1 - std::pow(s.momentum2, t)) /
                                    (1 - std::pow(s.momentum, t)));
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
      for (std::ptrdiff_t i = 0; i < n; ++i) {
        const T g = grad(i);
        h[i] = momentum * h[i] + (1 - momentum) * g;
        h2[i] = beta2 * h2[i] + (1 - beta2) * g * g;
        w[i] -= rate * h[i] / (std::sqrt(h2[i]) + delta);
      }
      break;
    }
  }
}

}  // namespace

const char* to_string(SolverType type) {
  switch (type) {
    case SolverType::kSgd: return "SGD";
    case SolverType::kNesterov: return "Nesterov";
    case SolverType::kAdaGrad: return "AdaGrad";
    case SolverType::kRmsProp: return "RMSProp";
    case SolverType::kAdaDelta: return "AdaDelta";
    case SolverType::kAdam: return "Adam";
  }
  return "?";
}

SolverSettings make_solver_settings(const proto::SolverParameter& solver, const std::string& source) {
  SolverSettings s;
  s.type = parse_type(solver, source);
  s.momentum = solver.momentum();
  s.weight_decay = solver.weight_decay();
  s.delta = solver.delta();
  s.momentum2 = solver.momentum2();
  s.rms_decay = solver.rms_decay();
  s.clip_gradients = solver.clip_gradients();
  s.iter_size = solver.iter_size();
  require(std::isfinite(s.weight_decay) && s.weight_decay >= 0, source,
          cat("weight_decay must be >= 0 (got ", s.weight_decay, ")"));
  require(std::isfinite(s.momentum) && s.momentum >= 0 && s.momentum < 1, source,
          cat("momentum must be in [0, 1) (got ", s.momentum, ")"));
  if (s.type == SolverType::kAdaGrad)  // Caffe: AdaGrad takes no momentum
    require(s.momentum == 0, source, cat("AdaGrad takes no momentum (got ", s.momentum, ")"));
  if (s.type == SolverType::kRmsProp)
    require(std::isfinite(s.rms_decay) && s.rms_decay >= 0 && s.rms_decay < 1, source,
            cat("rms_decay must be in [0, 1) (got ", s.rms_decay, ")"));
  if (s.type == SolverType::kAdam)
    require(std::isfinite(s.momentum2) && s.momentum2 >= 0 && s.momentum2 < 1, source,
            cat("momentum2 must be in [0, 1) (got ", s.momentum2, ")"));
  require(std::isfinite(s.delta) && s.delta > 0, source, cat("delta must be > 0 (got ", s.delta, ")"));
  require(std::isfinite(s.clip_gradients), source, "clip_gradients must be a number");
  return s;
}

void solver_update(const SolverSettings& s, const StepScalars& k, std::span<float> data,
                   std::span<const float> diff, std::span<float> history, std::span<float> history2) {
  update(s, k, data, diff, history, history2);
}

void solver_update(const SolverSettings& s, const StepScalars& k, std::span<double> data,
                   std::span<const double> diff, std::span<double> history, std::span<double> history2) {
  update(s, k, data, diff, history, history2);
}

void sgd_update(std::span<float> data, std::span<const float> diff, std::span<float> history,
                float lr, float momentum, float decay) {
  SolverSettings s;
  s.momentum = momentum;
  update<float>(s, {lr, decay, 1, 1}, data, diff, history, {});
}

void sgd_update(std::span<double> data, std::span<const double> diff, std::span<double> history,
                double lr, double momentum, double decay) {
  SolverSettings s;
  s.momentum = momentum;
  update<double>(s, {lr, decay, 1, 1}, data, diff, history, {});
}

}  // namespace cgdp
