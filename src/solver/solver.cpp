// One SGD step over the net's flat buffers, one run of parameter tensors with the same lr/decay
// multipliers at a time; on the host (CPU backend) or as kernels (CUDA).
#include "cgdp/solver/solver.hpp"

#ifdef CGDP_HAVE_CUDA
#include "cuda/cuda_stream.hpp"
#include "sgd_update.cuh"
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
Solver<T>::Solver(Net<T>& net, LrPolicy policy, SgdSettings sgd)
    : net_(net),
      ranges_(merged_ranges<Range>(net.param_slots())),
      policy_(std::move(policy)),
      sgd_(sgd),
      history_(net.device(), static_cast<size_t>(net.learnable_count()) * sizeof(T)) {}

template <typename T>
void Solver<T>::update_on_host(double rate, double grad_scale) {
  auto data = net_.flat_data();
  auto diff = net_.flat_diff();
  auto hist = history();
  if (grad_scale != 1.0)
    for (T& g : diff) g = static_cast<T>(g * grad_scale);
  for (const Range& r : ranges_) {
    const auto off = static_cast<size_t>(r.offset), n = static_cast<size_t>(r.count);
    sgd_update(data.subspan(off, n), std::span<const T>(diff.subspan(off, n)), hist.subspan(off, n),
               static_cast<T>(rate * r.lr_mult), static_cast<T>(sgd_.momentum),
               static_cast<T>(sgd_.weight_decay * r.decay_mult));
  }
}

template <typename T>
void Solver<T>::step(Stream& stream, double grad_scale) {
  const double rate = learning_rate();
  ++iteration_;
  if (net_.device().kind() == DeviceKind::Cpu) {
    stream.submit([this, rate, grad_scale] { update_on_host(rate, grad_scale); });
    return;
  }
#ifdef CGDP_HAVE_CUDA
  stream.submit([&] {
    T* data = net_.flat_data().data();
    T* diff = net_.flat_diff().data();
    T* hist = history().data();
    for (const Range& r : ranges_)
      kernels::sgd_update(data + r.offset, diff + r.offset, hist + r.offset, r.count, grad_scale,
                          static_cast<T>(rate * r.lr_mult), static_cast<T>(sgd_.momentum),
                          static_cast<T>(sgd_.weight_decay * r.decay_mult), native_stream(stream));
  });
#else
  throw DeviceError(cat(net_.device().name(), ": this cgdp was built without CUDA"));
#endif
}

template class Solver<float>;
template class Solver<double>;

}  // namespace cgdp
