// One solver step over the net's flat buffers, one run of parameter tensors with the same lr/decay
// multipliers at a time; on the host (CPU backend) or as kernels (CUDA).
#include "cgdp/solver/solver.hpp"

#include <cmath>

#ifdef CGDP_HAVE_CUDA
#include "cuda/cuda_check.hpp"
#include "cuda/cuda_stream.hpp"
#include "solver_update.cuh"
#endif

namespace cgdp {

namespace {

// Consecutive slots (they are contiguous in the flat buffers) merge when their multipliers match:
// the update is elementwise, so this changes no value, only the number of passes or launches.
template <typename Range>
std::vector<Range> merged_ranges(const std::vector<ParamSlot>& slots) {
  std::vector<Range> ranges;
  for (const ParamSlot& s : slots) {
    if (!ranges.empty() && ranges.back().offset + ranges.back().count == s.offset &&
        ranges.back().lr_mult == s.lr_mult && ranges.back().decay_mult == s.decay_mult) {
      ranges.back().count += s.count;
    } else {
      ranges.push_back({s.offset, s.count, s.lr_mult, s.decay_mult});
    }
  }
  return ranges;
}

}  // namespace

template <typename T>
Solver<T>::Solver(Net<T>& net, LrPolicy policy, SolverSettings settings)
    : net_(net), ranges_(merged_ranges<Range>(net.param_slots())), policy_(std::move(policy)), settings_(settings) {
  const size_t bytes = static_cast<size_t>(net.learnable_count()) * sizeof(T);
  for (int k = 0; k < settings_.histories(); ++k) history_[k] = DeviceBuffer(net.device(), bytes);
#ifdef CGDP_HAVE_CUDA
  if (net.device().kind() != DeviceKind::Cpu)  // the sum of squares comes back through it
    clip_sum_ = DeviceBuffer(net.device(), (kernels::kSumSquaresBlocks + 1) * sizeof(double));
#endif
}

template <typename T>
double Solver<T>::clipped_scale(double grad_scale, double sum_of_squares) const {
  if (!(settings_.clip_gradients > 0)) return grad_scale;
  // Caffe's norm is of the gradient summed over micro-batches and averaged over workers.
  const double norm = std::sqrt(sum_of_squares) * grad_scale * settings_.iter_size;
  return norm > settings_.clip_gradients ? grad_scale * settings_.clip_gradients / norm : grad_scale;
}

template <typename T>
void Solver<T>::update_on_host(double rate, double grad_scale, int64_t step) {
  auto data = net_.flat_data();
  auto diff = net_.flat_diff();
  last_skipped_ = false;
  if (needs_sum_of_squares()) {
    // An Inf or NaN anywhere makes the sum one: float squares cannot overflow a double's range.
    double sum = 0;
    const T* g = diff.data();
    const auto n = static_cast<int64_t>(diff.size());
#pragma omp parallel for simd reduction(+ : sum) schedule(static) if (n > (1 << 16))
    for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(g[i]) * g[i];
    if (skip_non_finite_ && !std::isfinite(sum)) {
      last_skipped_ = true;
      return;
    }
    grad_scale = clipped_scale(grad_scale, sum);
  }
  const bool two = settings_.histories() == 2;
  for (const Range& r : ranges_) {
    const auto off = static_cast<size_t>(r.offset), n = static_cast<size_t>(r.count);
    solver_update(settings_, {rate * r.lr_mult, settings_.weight_decay * r.decay_mult, grad_scale, step},
                  data.subspan(off, n), std::span<const T>(diff.subspan(off, n)), history(0).subspan(off, n),
                  two ? history(1).subspan(off, n) : std::span<T>());
  }
}

template <typename T>
void Solver<T>::update_on_device(Stream& stream, double rate, double grad_scale, int64_t step) {
#ifdef CGDP_HAVE_CUDA
  const cudaStream_t s = native_stream(stream);
  T* data = net_.flat_data().data();
  T* diff = net_.flat_diff().data();
  last_skipped_ = false;
  if (needs_sum_of_squares() && net_.learnable_count() > 0) {
    // The norm comes back to the host: one wait at the end of an iteration, before the update
    // kernels (a few launches) are issued.
    kernels::sum_squares(diff, net_.learnable_count(), static_cast<double*>(clip_sum_.get()), s);
    double host = 0;
    CUDA_CHECK(cudaMemcpyAsync(&host, clip_sum_.get(), sizeof host, cudaMemcpyDeviceToHost, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
    if (skip_non_finite_ && !std::isfinite(host)) {
      last_skipped_ = true;
      return;
    }
    grad_scale = clipped_scale(grad_scale, host);
  }
  kernels::RuleScalars k;
  k.rule = static_cast<kernels::Rule>(settings_.type);
  k.grad_scale = grad_scale;
  k.momentum = settings_.momentum;
  k.delta = settings_.delta;
  k.momentum2 = settings_.momentum2;
  k.rms_decay = settings_.rms_decay;
  const bool two = settings_.histories() == 2;
  for (const Range& r : ranges_) {
    k.lr = rate * r.lr_mult;
    k.decay = settings_.weight_decay * r.decay_mult;
    k.adam_rate = k.lr * std::sqrt(1 - std::pow(settings_.momentum2, static_cast<double>(step))) /
                  (1 - std::pow(settings_.momentum, static_cast<double>(step)));
    kernels::solver_update(data + r.offset, diff + r.offset, history(0).data() + r.offset,
                           two ? history(1).data() + r.offset : nullptr, r.count, k, s);
  }
#else
  (void)stream, (void)rate, (void)grad_scale, (void)step;
  throw DeviceError(cat(net_.device().name(), ": this cgdp was built without CUDA"));
#endif
}

template <typename T>
void Solver<T>::step(Stream& stream, double grad_scale) {
  const double rate = learning_rate();
  const int64_t step = ++iteration_;  // Adam's t counts from 1
  if (net_.device().kind() == DeviceKind::Cpu) {
    stream.submit([this, rate, grad_scale, step] { update_on_host(rate, grad_scale, step); });
    return;
  }
  stream.submit([this, &stream, rate, grad_scale, step] { update_on_device(stream, rate, grad_scale, step); });
}

template class Solver<float>;
template class Solver<double>;

}  // namespace cgdp
