// One solver step over the net's flat buffers, one run of parameter tensors with the same lr/decay
// multipliers at a time; on the host (CPU backend) or as kernels (CUDA).
#include "cgdp/solver/solver.hpp"

#include <algorithm>
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
Solver<T>::Solver(Net<T>& net, LrPolicy policy, SolverSettings settings, HistoryPlace place,
                  int worker)
    : net_(net),
      ranges_(merged_ranges<Range>(net.param_slots())),
      policy_(std::move(policy)),
      settings_(settings) {
  // Streamed weights are updated through the history's stage, so their history waits there too.
  if (place == HistoryPlace::Host || !net.host_flat_data().empty()) {
    host_history_ = std::make_unique<HostHistory<T>>(
        net.device(), net.learnable_count(), settings_.histories(), worker,
        typename HostHistory<T>::Streamed{net.host_flat_data(), net.host_flat_diff()});
  } else {
    const size_t bytes = static_cast<size_t>(net.learnable_count()) * sizeof(T);
    for (int k = 0; k < settings_.histories(); ++k) history_[k] = DeviceBuffer(net.device(), bytes);
  }
#ifdef CGDP_HAVE_CUDA
  if (net.device().kind() != DeviceKind::Cpu)  // the sum of squares comes back through it
    clip_sum_ = DeviceBuffer(net.device(), kernels::kSumSquaresBytes);
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
void Solver<T>::check_gradient(Stream& stream, double grad_scale) {
  last_skipped_ = false;
  step_scale_ = grad_scale;
  if (!needs_sum_of_squares() || net_.learnable_count() == 0) return;
  // An Inf or NaN anywhere makes the sum one: float squares cannot overflow a double's range.
  double sum = 0;
  if (net_.device().kind() == DeviceKind::Cpu) {
    // One loop over both parts (streamed weights on the host), so the sum's order is the same.
    const T* g = net_.flat_diff().data();
    const T* host = net_.host_flat_diff().data();
    const int64_t n = net_.learnable_count(), on_device = net_.device_learnable_count();
#pragma omp parallel for simd reduction(+ : sum) schedule(static) if (n > (1 << 16))
    for (int64_t i = 0; i < n; ++i) {
      const T x = i < on_device ? g[i] : host[i - on_device];
      sum += static_cast<double>(x) * x;
    }
  } else {
#ifdef CGDP_HAVE_CUDA
    // The norm comes back to the host: one wait at the end of an iteration, before the update
    // kernels (a few launches) are issued.
    const cudaStream_t s = native_stream(stream);
    kernels::sum_squares(net_.flat_diff().data(), net_.device_learnable_count(),
                         static_cast<double*>(clip_sum_.get()), s);
    CUDA_CHECK(cudaMemcpyAsync(&sum, clip_sum_.get(), sizeof sum, cudaMemcpyDeviceToHost, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
#else
    (void)stream;
    throw DeviceError(cat(net_.device().name(), ": this cgdp was built without CUDA"));
#endif
  }
  last_skipped_ = skip_non_finite_ && !std::isfinite(sum);
  step_scale_ = clipped_scale(grad_scale, sum);
}

template <typename T>
void Solver<T>::update_range(Stream& stream, const Range& r, T* data, const T* diff, T* h, T* h2,
                             double rate, int64_t step) {
  const double lr = rate * r.lr_mult, decay = settings_.weight_decay * r.decay_mult;
  if (net_.device().kind() == DeviceKind::Cpu) {
    const auto n = static_cast<size_t>(r.count);
    solver_update(settings_, {lr, decay, step_scale_, step}, std::span<T>(data, n),
                  std::span<const T>(diff, n), std::span<T>(h, n),
                  h2 ? std::span<T>(h2, n) : std::span<T>());
    return;
  }
#ifdef CGDP_HAVE_CUDA
  kernels::RuleScalars k;
  k.rule = static_cast<kernels::Rule>(settings_.type);
  k.grad_scale = step_scale_;
  k.momentum = settings_.momentum;
  k.delta = settings_.delta;
  k.momentum2 = settings_.momentum2;
  k.rms_decay = settings_.rms_decay;
  k.lr = lr;
  k.decay = decay;
  k.adam_rate = k.lr * std::sqrt(1 - std::pow(settings_.momentum2, static_cast<double>(step))) /
                (1 - std::pow(settings_.momentum, static_cast<double>(step)));
  kernels::solver_update(data, diff, h, h2, r.count, k, native_stream(stream));
#else
  (void)stream, (void)data, (void)diff, (void)h, (void)h2, (void)lr, (void)decay, (void)step;
  throw DeviceError(cat(net_.device().name(), ": this cgdp was built without CUDA"));
#endif
}

template <typename T>
void Solver<T>::update_elements(Stream& stream, int64_t offset, int64_t count, T* data,
                                const T* diff, T* h, T* h2, double rate, int64_t step) {
  if (last_skipped_) return;
  const int64_t end = offset + count;
  for (const Range& r : ranges_) {  // the update is elementwise: any cut of a range is the same
    const int64_t from = std::max(r.offset, offset), to = std::min(r.offset + r.count, end);
    if (from >= to) continue;
    const Range part{from, to - from, r.lr_mult, r.decay_mult};
    const int64_t at = from - offset;
    update_range(stream, part, data + at, diff + at, h + at, h2 ? h2 + at : nullptr, rate, step);
  }
}

template <typename T>
void Solver<T>::step(Stream& stream, double grad_scale) {
  const double rate = learning_rate();
  const int64_t step = ++iteration_;  // Adam's t counts from 1
  if (host_history_) {
    stream.submit([this, &stream, grad_scale] { check_gradient(stream, grad_scale); });
    host_history_->issue_step(
        stream, [this, &stream, rate, step](int64_t offset, int64_t count, T* h, T* h2, T* data,
                                            const T* diff) {
          if (!data) {  // a piece of the flat buffers on the device
            data = net_.flat_data().data() + offset;
            diff = net_.flat_diff().data() + offset;
          }
          update_elements(stream, offset, count, data, diff, h, h2, rate, step);
        });
    return;
  }
  stream.submit([this, &stream, rate, grad_scale, step] {
    check_gradient(stream, grad_scale);
    T* h2 = settings_.histories() == 2 ? history(1).data() : nullptr;
    update_elements(stream, 0, net_.learnable_count(), net_.flat_data().data(),
                    net_.flat_diff().data(), history(0).data(), h2, rate, step);
  });
}

template class Solver<float>;
template class Solver<double>;

}  // namespace cgdp
