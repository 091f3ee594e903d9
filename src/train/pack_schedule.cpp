// The packs' narrowing and widening (pack_schedule.hpp): host loops on a CPU stream,
// kernels/half_convert.cu on CUDA.
#include "cgdp/train/pack_schedule.hpp"

#include "cgdp/core/error.hpp"
#include "cgdp/trace/stream_trace.hpp"

#ifdef CGDP_HAVE_CUDA
#include "cuda/cuda_stream.hpp"
#include "cuda/half_operands.hpp"
#endif

namespace cgdp {

namespace {

int64_t elements(const PlannedActivation& a) {
  return a.bytes / static_cast<int64_t>(sizeof(float));
}

void issue_narrow(Stream& stream, DeviceKind kind, Precision precision,
                  const PlannedActivation& a) {
  const auto* values = static_cast<const float*>(a.device_ptr);
  auto* pack = static_cast<uint16_t*>(a.pack_ptr);
  const int64_t n = elements(a);
  const bool signs = a.signs_only;
  if (kind == DeviceKind::Cpu) {
    stream.submit([=] {
      signs ? narrow_keeping_signs(precision, values, pack, n)
            : narrow_to_precision(precision, values, pack, n);
    });
    return;
  }
#ifdef CGDP_HAVE_CUDA
  stream.submit([&] {
    signs ? kernels::narrow_keeping_signs(values, pack, n, half16(precision), native_stream(stream))
          : kernels::narrow(values, pack, n, half16(precision), nullptr, native_stream(stream));
  });
#else
  throw DeviceError(cat("stream '", stream.name(), "': this cgdp was built without CUDA"));
#endif
}

void issue_widen(Stream& stream, DeviceKind kind, Precision precision, const PlannedActivation& a) {
  const auto* pack = static_cast<const uint16_t*>(a.pack_ptr);
  auto* values = static_cast<float*>(a.device_ptr);
  const int64_t n = elements(a);
  if (kind == DeviceKind::Cpu) {
    stream.submit([=] { widen_from_precision(precision, pack, values, n); });
    return;
  }
#ifdef CGDP_HAVE_CUDA
  stream.submit(
      [&] { kernels::widen(pack, values, n, half16(precision), nullptr, native_stream(stream)); });
#else
  throw DeviceError(cat("stream '", stream.name(), "': this cgdp was built without CUDA"));
#endif
}

}  // namespace

PackSchedule::PackSchedule(DeviceKind kind, Precision precision, const ActivationPlan& plan,
                           int worker)
    : kind_(kind), precision_(precision), worker_(worker) {
  if (plan.packed_count() == 0) return;
  CGDP_ASSERT(is_16_bit(precision));
  narrow_after_.resize(static_cast<size_t>(plan.steps));
  widen_before_.resize(static_cast<size_t>(plan.steps));
  for (const PlannedActivation& a : plan.activations)
    if (a.packed) {
      narrow_after_[ActivationPlan::copy_step(a)].push_back(&a);
      if (!a.read_packed) widen_before_[a.first_backward].push_back(&a);
    }
}

void PackSchedule::before_step(int step, Stream& compute, Timeline& timeline) {
  if (empty()) return;
  for (const PlannedActivation* a : widen_before_[step])
    traced(compute, timeline, worker_, "compute", a->name, "pack",
           [&] { issue_widen(compute, kind_, precision_, *a); }, {{"bytes", a->bytes}});
}

void PackSchedule::after_step(int step, Stream& compute, Timeline& timeline) {
  if (empty()) return;
  for (const PlannedActivation* a : narrow_after_[step])
    traced(compute, timeline, worker_, "compute", a->name, "pack",
           [&] { issue_narrow(compute, kind_, precision_, *a); }, {{"bytes", a->bytes}});
}

}  // namespace cgdp
