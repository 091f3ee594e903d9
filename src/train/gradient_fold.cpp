// Micro-batch k merges with as many pending partial sums as k has trailing one bits, exactly as
// the binary counter in host_sum.cpp does per element.
#include "cgdp/train/gradient_fold.hpp"

#include <bit>

#include "cgdp/sync/device_sum.hpp"

namespace cgdp {

namespace {

int pending_before(int micro) { return std::popcount(static_cast<unsigned>(micro)); }

}  // namespace

void GradientFold::add(Device& device, Stream& stream, const float* diff, int64_t n, int micro) {
  const int depth = pending_before(micro);
  const int carries = std::countr_one(static_cast<unsigned>(micro));
  if (carries == 0) {  // a new partial sum: a copy of this micro-batch's gradients
    if (static_cast<int>(partials_.size()) <= depth)
      partials_.emplace_back(device, static_cast<size_t>(n) * sizeof(float));
    float* fresh = static_cast<float*>(partials_[depth].get());
    issue_sum(stream, device.kind(), fresh, {diff}, n);
    return;
  }
  auto at = [&](int d) { return static_cast<float*>(partials_[d].get()); };
  issue_sum(stream, device.kind(), at(depth - 1), {at(depth - 1), diff}, n);
  for (int d = depth - 2; d >= depth - carries; --d)
    issue_sum(stream, device.kind(), at(d), {at(d), at(d + 1)}, n);
}

void GradientFold::fold_into(Device& device, Stream& stream, float* diff, int64_t begin, int64_t end,
                             int micro) {
  // Merging the carries and folding what remains are the same step: pending + running sum.
  for (int d = pending_before(micro) - 1; d >= 0; --d) {
    const float* partial = static_cast<const float*>(partials_[d].get()) + begin;
    issue_sum(stream, device.kind(), diff + begin, {partial, diff + begin}, end - begin);
  }
}

}  // namespace cgdp
