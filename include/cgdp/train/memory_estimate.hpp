// What a training run will allocate, measured before anything is: one worker's train net (and the
// test net) is built on a MeasuringDevice by the real allocation rules, then scaled to the run.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "cgdp.pb.h"
#include "cgdp/cost/offload_cost.hpp"
#include "cgdp/device/conv_algorithm_table.hpp"
#include "cgdp/device/device.hpp"
#include "cgdp/device/layer_precision.hpp"
#include "cgdp/net/activation_plan.hpp"
#include "cgdp/sync/chunk_plan.hpp"
#include "cgdp/sync/exchange_dtype.hpp"
#include "cgdp/sync/sync_scheme.hpp"

namespace cgdp {

struct MemoryEstimate {
  // One replica of the train net on one worker's device.
  int64_t parameters = 0;   // the flat parameter buffer
  int64_t gradients = 0;    // the flat gradient buffer
  int64_t activations = 0;  // tops and their gradients
  int64_t scratch = 0;      // what layers keep besides (im2col columns, masks, statistics, ...)
  int64_t history = 0;      // the solver's momentum, on each worker that updates (or its stage)
  int64_t solver_scratch = 0;  // CUDA: where the clip's sum of squares comes back, each updater
  // cgdp with --exchange-dtype bf16/fp16, each worker: its gradient narrowed to 16 bits, the 16-bit
  // sums landing, and fp16's scales both ways (add_exchange_buffers).
  int64_t exchange_narrow = 0;
  // cgdp, each worker: the weights sent as sufficient factors, their rows staged and every
  // worker's received (add_factor_buffers).
  int64_t exchange_factors = 0;
  // The layers with parameters (at most one exchange chunk each), in backward order.
  std::vector<ParamLayer> params;
  // Per updating worker, pinned: the history when it waits on the host between steps and only its
  // stage is on the device (solver/host_history.hpp); 0 when it stays on the device.
  int64_t history_host = 0;
  // Weights streamed from pinned host memory (ActivationMemoryPlan::streamed_weights), per
  // worker: their bytes (the host holds them and their gradients), and the layers'.
  int64_t streamed = 0;
  std::vector<std::string> streamed_layers;
  // The weights that could be streamed, largest first: (layer, bytes).
  std::vector<std::pair<std::string, int64_t>> streamable;
  int64_t learnable = 0;  // elements of the flat buffers, device and host parts together
  int64_t fold = 0;  // --accumulate's pending partial sums (gradient_fold.hpp), set by the trainer
  int64_t test_net = 0;     // worker 0 only: the test net at its batch (it shares the parameters)
  int64_t pinned = 0;       // host: the aggregator's per-worker copies and their sum (cgdp)
  // CUDA, set by the trainer: cuDNN's scratch on each worker (one per compute stream, searches
  // included, at most --cudnn-workspace-mb) and the filter gradient a search writes beside it.
  int64_t cudnn_scratch = 0;
  int64_t largest_convolution_weights = 0;  // bytes; 0 when the net has no convolution
  // The most the per-channel sums of BatchNorm, Scale and Bias on CUDA take of that scratch
  // (kernels/per_channel_scratch.cuh), bounded by their channels.
  int64_t per_channel_scratch = 0;
  // The cuDNN passes of the train and test nets' convolutions, as their choices are keyed; and
  // whether stored choices held every one, so that cudnn_scratch is only what those need.
  std::vector<ConvPassProblem> cudnn_passes;
  bool cudnn_scratch_stored = false;
  // CUDA in bf16/fp16, set by the trainer: the 16-bit copies of the largest multiplying layer's
  // operands (half_operand_bytes), one per compute stream; and on worker 0, whose stream runs
  // the test net too, what the test net's largest call takes beyond that.
  int64_t half_operands = 0;
  int64_t test_half_operands = 0;
  // Bytes of the train and the test net's largest call, in any precision; 0: none.
  int64_t largest_half_operands = 0, largest_test_half_operands = 0;
  // The highest a net's device held while it was built and planned (each layer's own
  // parameters are there for a moment before they move to the flat buffer or are shared).
  int64_t train_peak = 0, test_peak = 0;
  // Planned activations (ActivationMemory::Planned): the train net's arena (within
  // `activations`), and what waits on the host between forward and backward.
  bool planned = false;
  int64_t arena = 0;
  int64_t offload_host = 0;      // pinned, per worker
  int64_t offload_each_way = 0;  // bytes copied out, and back, per micro-batch
  int offloaded = 0, planned_units = 0;
  int packed = 0;                           // units that wait in 16 bits (a 16-bit run)
  int64_t packed_bytes = 0;                 // their values' fp32 size (half of it is saved)
  int64_t rounded_bytes = 0;                // of those, what comes back rounded (Packing::Rounding)
  int read_packed = 0;   // of those, units every backward reader reads in 16 bits: never widened
  int written_over = 0;  // of those, units the next layer writes its output over (an LRN's input)
  ArenaPeak arena_peak;  // the arena's fullest step and what holds its bytes there
  std::vector<OffloadCopy> offload_copies;  // one per offloaded activation
  std::vector<std::string> layer_names;     // the train net's, in order (the steps' layers)
  int workers = 1;
  SyncKind sync = SyncKind::Local;
  int64_t batch = 0, test_batch = 0;

  bool history_on_host() const { return history_host > 0; }
  int updating_workers() const { return sync == SyncKind::Ps0 ? 1 : workers; }
  int64_t replica() const { return parameters + gradients + activations + scratch + fold; }
  // ps0: worker w's receive buffers, one per child in the reduction tree (ps0_sync.cpp).
  int64_t receive_bytes(int w) const;
  // Everything on worker w's device.
  int64_t worker_bytes(int w) const;
  // The most worker w's device holds at any moment: building its train net, building the test net
  // beside it (worker 0), or training.
  int64_t worker_peak(int w) const;
  // Every worker's device memory, summed.
  int64_t device_total() const;
  // The device memory of the fullest GPU when workers share `gpus` GPUs round-robin (worker.cpp).
  int64_t fullest_gpu(int gpus) const;
  // The workers on that GPU.
  int workers_on_fullest_gpu(int gpus) const;
};

// Measures `model` (file `source`) at per-worker `batch` and `test_batch` for `workers` workers
// synchronised by `sync`, whose solver keeps `histories` buffers per parameter (2 for AdaDelta and
// Adam). Model errors are thrown as the real build would throw them.
// `test_model` (file `test_source`): the test net's own file (a solver's test_net); null: the
// model's TEST phase.
// `activations`: planned, the train net's arena within its limit and the test net's by liveness.
// `kind`: the workers' devices; the nets are built as on them (MeasuringDevice's counts_for).
MemoryEstimate estimate_memory(const proto::NetParameter& model, const std::string& source,
                               int64_t batch, int64_t test_batch, int workers, SyncKind sync,
                               int histories = 1, const proto::NetParameter* test_model = nullptr,
                               const std::string& test_source = "",
                               const ActivationMemoryPlan& activations = {},
                               DeviceKind kind = DeviceKind::Cpu);

// What a CUDA worker holds besides its nets (train and inspect count it alike): cuDNN's scratch
// of `cudnn_workspace_mb` with a search's filter gradient, and in bf16/fp16 the 16-bit operand
// copies. Nothing on other backends. When `choices` (--cudnn-algorithms) hold every pass of the
// nets' convolutions for GPU model `gpu` (any model in them, when empty), no search runs and the
// scratch is the most those algorithms need. Call with cuda_options() set as the run's.
void add_cuda_scratch(MemoryEstimate& m, DeviceKind kind, int64_t cudnn_workspace_mb,
                      Precision precision, const ConvAlgorithmTable* choices = nullptr,
                      const std::string& gpu = "");

// What cgdp's 16-bit exchange (--exchange-dtype bf16 or fp16) keeps on each worker's device
// (sync/cgdp_sync.cpp's narrow buffers); nothing for fp32 or another scheme.
void add_exchange_buffers(MemoryEstimate& m, SyncKind sync, ExchangeDtype dtype);

// What cgdp's weights sent as sufficient factors keep on each worker's device
// (sync/factor_buffers.hpp): `factored` per param layer, as chosen for the run (a weight this
// estimate streams from the host is not factorable, and counts nothing); each worker receives
// the rows of `all_workers`. Nothing for another scheme.
void add_factor_buffers(MemoryEstimate& m, SyncKind sync, const std::vector<bool>& factored,
                        int micro_batches, int64_t all_workers, ExchangeDtype dtype);

// "1.5 GiB", "310.2 MiB", "12 KiB"
std::string format_bytes(int64_t bytes);

// The free memory a run on `kind` may use: for CPU, the host's MemAvailable (capped by the cgroup's
// limit); for CUDA, the smallest free memory over the GPUs (cudaMemGetInfo).
int64_t free_memory_bytes(DeviceKind kind);

// What a budget bounds: one device (a GPU, or a CPU worker under --device-memory-gb), or the
// whole run in RAM (CPU workers and their pinned host memory under the free RAM).
enum class BudgetScope { Device, WholeRun };

// Bytes the run needs within `scope` (on CUDA: the fullest GPU).
int64_t needed_bytes(const MemoryEstimate& m, DeviceKind kind, int gpus, BudgetScope scope);

// --pack-activations: "on", "exact", "off", or "auto": as on for CUDA workers (device memory is
// what is short, and the kernels run at its bandwidth), and as exact for CPU workers, only to fit
// a budget (there the passes take the layers' cores). Throws UsageError for anything else.
bool packs_from_the_start(const std::string& mode, DeviceKind kind);
// What the mode packs on workers of `kind` when the run packs.
Packing packing_of(const std::string& mode, DeviceKind kind);

// How a run's activations take memory before any budget asks: planned by liveness in a 16-bit
// run that packs (activation_plan.hpp: the packs live in the arena); else each in its own memory.
// `pack_mode`: --pack-activations, for workers of `kind`.
ActivationMemoryPlan default_activation_memory(Precision precision,
                                               const std::string& pack_mode = "on",
                                               DeviceKind kind = DeviceKind::Cuda);

// A run's memory once its activations are planned to fit.
struct FittedMemory {
  ActivationMemoryPlan activations;
  MemoryEstimate estimate;
};

// GeePS's answer to a run that does not fit `budget`: activations in an arena planned by liveness,
// and when that is not enough, an arena limit that keeps as many as it takes waiting on the host
// between forward and backward (net/activation_plan.hpp). `estimate` measures the run with a plan.
FittedMemory fit_activations(
    const std::function<MemoryEstimate(const ActivationMemoryPlan&)>& estimate, DeviceKind kind,
    int gpus, int64_t budget, BudgetScope scope);

// The solver's history moved to pinned host memory on every updating worker; the device keeps
// its stage.
void put_history_on_host(MemoryEstimate& m);

// fit_activations, and when that is not enough, the solver's history on the host as well (on a
// budget of one device: in RAM the pinned copy would cost what it saves). With a `profile`, also
// when both fit and the history's staging costs less than the activations' copies it spares.
// When even that does not fit, a CPU run, in any precision, streams InnerProduct weights from the
// host, largest first, until it does (GeePS's parameters of layers not in use).
FittedMemory fit_offload(const std::function<MemoryEstimate(const ActivationMemoryPlan&)>& estimate,
                         DeviceKind kind, int gpus, int64_t budget, BudgetScope scope,
                         const Profile* profile = nullptr);

// One pass with and without the copies of a planned estimate, the steps' times from `profile`
// (its layers by name; layers it lacks take no time) and the copies on its d2h and h2d links;
// with the history on the host, the step's copies of it too.
OffloadPassCost predict_offload(const MemoryEstimate& m, const Profile& profile);

// "activations planned by liveness in a 10.7 MiB arena per worker; 2 of 9 wait in pinned host
// memory ..." (planned estimates only).
std::string describe_offload(const MemoryEstimate& m);
// "the arena is fullest at conv1's backward (1.2 GiB): conv1 (gradient) 283.6 MiB, ...", the
// holders with the most bytes first; empty when the activations are not planned.
std::string describe_arena_peak(const MemoryEstimate& m, size_t holders_shown = 6);
// The layer and pass ("forward" or "backward") of a planned step.
std::pair<std::string, const char*> step_of(const MemoryEstimate& m, int step);

// Throws a UsageError, one line naming the largest parts and what shrinks them (flags, a smaller
// model), when the run does not fit `budget` bytes, which is `budget_is` ("the free RAM",
// "--device-memory-gb 80").
void check_memory_fits(const MemoryEstimate& m, DeviceKind kind, int gpus, int64_t budget,
                       const std::string& budget_is, BudgetScope scope);

}  // namespace cgdp
