// Micro-batch k merges with as many pending partial sums as k has trailing one bits, exactly as
// the binary counter in host_sum.cpp does per element.
#include "cgdp/train/gradient_fold.hpp"

#include <bit>

#include "cgdp/sync/device_sum.hpp"
#include "cgdp/sync/host_sum.hpp"

namespace cgdp {

namespace {

int pending_before(int micro) { return std::popcount(static_cast<unsigned>(micro)); }

}  // namespace

float* GradientFold::partial(int depth) const {
  return static_cast<float*>(on_host_ ? host_partials_[depth].get() : partials_[depth].get());
}

void GradientFold::sum(Device& device, Stream& stream, float* dst, std::vector<const float*> srcs,
                       int64_t n) {
  if (!on_host_) return issue_sum(stream, device.kind(), dst, std::move(srcs), n);
  stream.launch_host_func([dst, srcs = std::move(srcs), n] { sum_buffers(dst, srcs, n, 0); });
}

void GradientFold::add(Device& device, Stream& stream, const float* diff, int64_t n, int micro) {
  const int depth = pending_before(micro);
  const int carries = std::countr_one(static_cast<unsigned>(micro));
  if (carries == 0) {  // a new partial sum: a copy of this micro-batch's gradients
    const size_t bytes = static_cast<size_t>(n) * sizeof(float);
    if (on_host_ && static_cast<int>(host_partials_.size()) <= depth)
      host_partials_.emplace_back(device, bytes);
    if (!on_host_ && static_cast<int>(partials_.size()) <= depth)
      partials_.emplace_back(device, bytes);
    sum(device, stream, partial(depth), {diff}, n);
    return;
  }
  sum(device, stream, partial(depth - 1), {partial(depth - 1), diff}, n);
  for (int d = depth - 2; d >= depth - carries; --d)
    sum(device, stream, partial(d), {partial(d), partial(d + 1)}, n);
}

void GradientFold::fold_into(Device& device, Stream& stream, float* diff, int64_t begin, int64_t end,
                             int micro) {
  // Merging the carries and folding what remains are the same step: pending + running sum.
  for (int d = pending_before(micro) - 1; d >= 0; --d)
    sum(device, stream, diff + begin, {partial(d) + begin, diff + begin}, end - begin);
}

}  // namespace cgdp
