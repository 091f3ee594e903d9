// The solver's history in pinned host memory (GeePS's "data of layers not in use", issue 35): it is
// needed only while the update runs, so between steps it waits on the host, and each step brings
// it through a small device stage piece by piece: copied in on one stream, updated on the compute
// stream, copied out on another, two pieces in flight. Bytes move; no value changes.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "cgdp/device/device.hpp"

namespace cgdp {

// Elements per history buffer in one piece of the stage: an eighth of the buffer (so even a small
// net's step runs several pieces and overlaps them), at least 4 Ki, at most 2 Mi (8 MiB of floats,
// enough for a copy to reach a link's bandwidth).
int64_t history_stage_elements(int64_t learnable);

// Device bytes of the stage: two pieces of every history buffer, and with streamed weights of
// the parameters and the gradients.
int64_t history_stage_bytes(int64_t learnable, int histories, size_t element_bytes,
                            bool streamed = false);

template <typename T>
class HostHistory {
 public:
  // `histories` buffers of `count` elements, zeroed, on the host of `device`; `worker` names the
  // copy streams. `streamed`: the parameters and gradients of elements [count - streamed.size(),
  // count) are on the host too (Net's streamed weights): they pass through the stage beside their
  // history, the parameters both ways, the gradients in.
  struct Streamed {
    std::span<T> data;
    std::span<const T> diff;
  };
  HostHistory(Device& device, int64_t count, int histories, int worker, Streamed streamed = {});

  std::span<T> history(int k) {
    return {static_cast<T*>(host_[k].get()), static_cast<size_t>(count_)};
  }

  // Receives elements [offset, offset + count) of the history buffers, staged on the device
  // (`second` is null with one buffer), and of a streamed piece its parameters and gradients
  // (null otherwise: they are in the net's flat buffers); runs on the compute stream.
  using PieceUpdate = std::function<void(int64_t offset, int64_t count, T* first, T* second,
                                         T* data, const T* diff)>;
  // Issues one step: every piece copied in, `update` submitted on `compute` once it is there,
  // and copied out once that ran. `compute` ends waiting for the last copy out, so whoever
  // synchronizes it (a checkpoint, the next step) sees the history back on the host.
  void issue_step(Stream& compute, const PieceUpdate& update);

 private:
  struct Piece {
    int64_t offset = 0, count = 0;
    bool streamed = false;  // its parameters and gradients come through the stage too
    std::unique_ptr<Event> in_done, updated, out_done;
  };
  // Buffer k of a stage slot: the histories, then (streamed) the parameters and the gradients.
  T* stage(int slot, int k) const {
    return static_cast<T*>(stage_.get()) +
           (static_cast<int64_t>(slot) * buffers_ + k) * stage_count_;
  }
  void add_pieces(Device& device, int64_t begin, int64_t end, bool streamed);

  int64_t count_ = 0, stage_count_ = 0;
  int histories_ = 1;
  int buffers_ = 1;  // per stage slot
  Streamed streamed_;
  int64_t streamed_begin_ = 0;
  PinnedHostBuffer host_[2];
  DeviceBuffer stage_;  // [slot][history][stage_count_]
  std::unique_ptr<Stream> in_, out_;
  std::vector<Piece> pieces_;
  std::unique_ptr<Event> grads_ready_;  // streamed: recorded on compute when the step is issued
};

extern template class HostHistory<float>;
extern template class HostHistory<double>;

}  // namespace cgdp
