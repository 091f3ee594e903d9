// What a training run will allocate, measured before anything is: one worker's train net (and the
// test net) is built on a MeasuringDevice by the real allocation rules, then scaled to the run.
#pragma once

#include <cstdint>
#include <string>

#include "cgdp.pb.h"
#include "cgdp/device/device.hpp"
#include "cgdp/sync/sync_scheme.hpp"

namespace cgdp {

struct MemoryEstimate {
  // One replica of the train net on one worker's device.
  int64_t parameters = 0;   // the flat parameter buffer
  int64_t gradients = 0;    // the flat gradient buffer
  int64_t activations = 0;  // tops and their gradients
  int64_t scratch = 0;      // what layers keep besides (im2col columns, masks, statistics, ...)
  int64_t history = 0;      // the solver's momentum, on each worker that updates
  int64_t test_net = 0;     // worker 0 only: the test net at its batch (it shares the parameters)
  int64_t pinned = 0;       // host: the aggregator's per-worker copies and their sum (cgdp)
  int workers = 1;
  SyncKind sync = SyncKind::Local;
  int64_t batch = 0, test_batch = 0;

  int64_t replica() const { return parameters + gradients + activations + scratch; }
  // ps0: worker w's receive buffers, one per child in the reduction tree (ps0_sync.cpp).
  int64_t receive_bytes(int w) const;
  // Everything on worker w's device.
  int64_t worker_bytes(int w) const;
  // Every worker's device memory, summed.
  int64_t device_total() const;
  // The device memory of the fullest GPU when workers share `gpus` GPUs round-robin (worker.cpp).
  int64_t fullest_gpu(int gpus) const;
};

// Measures `model` (file `source`) at per-worker `batch` and `test_batch` for `workers` workers
// synchronised by `sync`, whose solver keeps `histories` buffers per parameter (2 for AdaDelta and
// Adam). Model errors are thrown as the real build would throw them.
// `test_model` (file `test_source`): the test net's own file (a solver's test_net); null: the
// model's TEST phase.
MemoryEstimate estimate_memory(const proto::NetParameter& model, const std::string& source,
                               int64_t batch, int64_t test_batch, int workers, SyncKind sync,
                               int histories = 1, const proto::NetParameter* test_model = nullptr,
                               const std::string& test_source = "");

// "1.5 GiB", "310.2 MiB", "12 KiB"
std::string format_bytes(int64_t bytes);

// The free memory a run on `kind` may use: for CPU, the host's MemAvailable (capped by the cgroup's
// limit); for CUDA, the smallest free memory over the GPUs (cudaMemGetInfo).
int64_t free_memory_bytes(DeviceKind kind);

// Throws a UsageError, one line naming the largest parts and what shrinks them (flags, a smaller model), when the
// run does not fit `budget` bytes. On the CPU the pinned host memory counts too (it is RAM), and
// the budget is `budget_is` ("available RAM", "--device-memory-gb 80").
void check_memory_fits(const MemoryEstimate& m, DeviceKind kind, int gpus, int64_t budget,
                       const std::string& budget_is);

}  // namespace cgdp
