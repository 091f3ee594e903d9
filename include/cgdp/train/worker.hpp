// One data-parallel worker: a device with its compute, D2H and H2D streams, its replica of the
// net, and (when it updates its own parameters) a solver. Each worker's forward and backward are
// issued on its streams by its own host thread (train/issue_threads.hpp).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cgdp/data/batch_loader.hpp"
#include "cgdp/device/devices.hpp"
#include "cgdp/net/net.hpp"
#include "cgdp/solver/solver.hpp"
#include "cgdp/sync/sync_worker.hpp"
#include "cgdp/trace/timeline.hpp"
#include "cgdp/train/gradient_fold.hpp"
#include "cgdp/train/offload_schedule.hpp"
#include "cgdp/train/pack_schedule.hpp"

namespace cgdp {

// Beside what the sync scheme sees (SyncWorker): the input, the losses and what a micro-batch's
// forward and backward keep.
struct Worker : SyncWorker {
  std::unique_ptr<Event> input_loaded;    // the batch slice has been copied in
  PinnedHostBuffer loss_slots;            // each micro-batch's loss tops land here
  std::vector<std::pair<Blob<float>*, float>> loss_tops;  // (top, weight)
  // With gradient accumulation: the earlier micro-batches' gradients, partly summed.
  GradientFold fold;
  // The same for the streamed weights' gradients, on the host (Net::host_flat_diff).
  GradientFold streamed_fold{/*on_host=*/true};
  // The copies of activations that wait on the host (a planned net that offloads).
  OffloadSchedule offload;
  // The activations that wait in 16 bits (a planned net in bf16/fp16).
  PackSchedule packing;

  // Copies rows [row_begin, row_begin + batch) of `batch` into the net's input (compute stream);
  // on the timeline it is the Input layer's forward.
  void issue_input(const Batch& batch, int64_t row_begin, Timeline& timeline);
  void issue_forward(const RunContext& ctx, Timeline& timeline);
  // `after_layer(i)` runs right after layer i's backward is issued. Micro-batch `micro` of
  // `micros`: each one's gradients are computed alone and folded into the earlier ones in the
  // binary-tree order every scheme sums in (host_sum.hpp), so accumulating N micro-batches and N
  // workers give the same bits. The last micro-batch folds
  // layer by layer, before `after_layer`, so a finished chunk can leave at once.
  void issue_backward(const RunContext& ctx, Timeline& timeline, int micro, int micros,
                      const std::function<void(int)>& after_layer);
  // Copies this micro-batch's loss tops to host slot `micro`.
  void issue_loss_readback(int micro);
  // Weighted loss of micro-batch `micro`, after the compute stream has been synchronized.
  double loss(int micro) const;
};

// Worker w's device: cpu:w, or on CUDA GPU w mod `gpus` (more workers than GPUs share them).
DeviceRef worker_device(int w, DeviceKind kind, int gpus);

// Creates `count` workers on `kind` devices (CPU devices cpu:0..N-1; CUDA workers round-robin
// over the GPUs, pinned memory on each GPU's NUMA node), each with its own streams and a net
// built from `model` with per-worker `batch`, its activations kept as `activations` says.
std::vector<Worker> make_workers(int count, DeviceKind kind, const proto::NetParameter& model,
                                 int64_t batch, uint64_t seed, const std::string& source,
                                 int max_micro_batches,
                                 const ActivationMemoryPlan& activations = {});

// Lines for the start of a run on CUDA: which workers share which GPU (more workers than GPUs),
// and where each worker's pinned host memory lives. Empty on the CPU backend.
std::vector<std::string> device_notes(const std::vector<Worker>& workers);

// Ends the iteration on every worker (all streams, even after a failure); rethrows the first failure naming the worker, its device
// and the stream ("compute", "d2h", "h2d") that failed at `iteration`.
void synchronize_all(std::vector<Worker>& workers, int64_t iteration);

}  // namespace cgdp
