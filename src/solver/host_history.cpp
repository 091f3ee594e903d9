// The solver's history staged through the device at each step (host_history.hpp).
#include "cgdp/solver/host_history.hpp"

#include <algorithm>
#include <cstring>

#include "cgdp/core/error.hpp"

namespace cgdp {

int64_t history_stage_elements(int64_t learnable) {
  const int64_t eighth = (learnable + 7) / 8;
  return std::min(learnable, std::clamp<int64_t>(eighth, 4 << 10, 2 << 20));
}

int64_t history_stage_bytes(int64_t learnable, int histories, size_t element_bytes, bool streamed) {
  const int buffers = histories + (streamed ? 2 : 0);
  return 2 * buffers * history_stage_elements(learnable) * static_cast<int64_t>(element_bytes);
}

template <typename T>
HostHistory<T>::HostHistory(Device& device, int64_t count, int histories, int worker,
                            Streamed streamed)
    : count_(count),
      stage_count_(history_stage_elements(count)),
      histories_(histories),
      buffers_(histories + (streamed.data.empty() ? 0 : 2)),
      streamed_(streamed),
      streamed_begin_(count - static_cast<int64_t>(streamed.data.size())) {
  CGDP_ASSERT(streamed.diff.size() == streamed.data.size() && streamed_begin_ >= 0);
  const size_t bytes = static_cast<size_t>(count) * sizeof(T);
  for (int k = 0; k < histories; ++k) {
    host_[k] = PinnedHostBuffer(device, bytes);
    if (bytes) std::memset(host_[k].get(), 0, bytes);  // CUDA's pinned memory comes uncleared
  }
  if (count == 0) return;
  stage_ = DeviceBuffer(device, static_cast<size_t>(history_stage_bytes(count, histories, sizeof(T),
                                                                        !streamed.data.empty())));
  in_ = device.create_stream(cat("w", worker, "-history-in"));
  out_ = device.create_stream(cat("w", worker, "-history-out"));
  add_pieces(device, 0, streamed_begin_, false);  // a piece never mixes the two
  add_pieces(device, streamed_begin_, count, true);
  if (!streamed.data.empty()) grads_ready_ = device.create_event();
}

template <typename T>
void HostHistory<T>::add_pieces(Device& device, int64_t begin, int64_t end, bool streamed) {
  for (int64_t offset = begin; offset < end; offset += stage_count_) {
    Piece& p = pieces_.emplace_back();
    p.offset = offset;
    p.count = std::min(stage_count_, end - offset);
    p.streamed = streamed;
    for (auto* event : {&p.in_done, &p.updated, &p.out_done}) *event = device.create_event();
  }
}

template <typename T>
void HostHistory<T>::issue_step(Stream& compute, const PieceUpdate& update) {
  if (pieces_.empty()) return;
  in_->wait(*pieces_.back().out_done);  // the last step's history is back on the host
  if (grads_ready_) compute.record(*grads_ready_);
  for (size_t i = 0; i < pieces_.size(); ++i) {
    Piece& p = pieces_[i];
    const int slot = static_cast<int>(i % 2);
    if (i >= 2) in_->wait(*pieces_[i - 2].out_done);  // the slot's last piece has left it
    const size_t bytes = static_cast<size_t>(p.count) * sizeof(T);
    for (int k = 0; k < histories_; ++k)
      in_->copy_async(stage(slot, k), history(k).data() + p.offset, bytes);
    T* data = p.streamed ? stage(slot, histories_) : nullptr;
    T* diff = p.streamed ? stage(slot, histories_ + 1) : nullptr;
    const int64_t at = p.offset - streamed_begin_;
    if (p.streamed) {
      if (i == 0 || !pieces_[i - 1].streamed) in_->wait(*grads_ready_);  // backward wrote them
      in_->copy_async(data, streamed_.data.data() + at, bytes);
      in_->copy_async(diff, streamed_.diff.data() + at, bytes);
    }
    in_->record(*p.in_done);
    compute.wait(*p.in_done);
    T* first = stage(slot, 0);
    T* second = histories_ == 2 ? stage(slot, 1) : nullptr;
    compute.submit([update, offset = p.offset, n = p.count, first, second, data, diff] {
      update(offset, n, first, second, data, diff);
    });
    compute.record(*p.updated);
    out_->wait(*p.updated);
    for (int k = 0; k < histories_; ++k)
      out_->copy_async(history(k).data() + p.offset, stage(slot, k), bytes);
    if (p.streamed) out_->copy_async(streamed_.data.data() + at, data, bytes);
    out_->record(*p.out_done);
  }
  compute.wait(*pieces_.back().out_done);
}

template class HostHistory<float>;
template class HostHistory<double>;

}  // namespace cgdp
