// How workers combine their gradients each iteration: `cgdp` (chunks summed on the host while
// backward goes on, every worker updates), `ps0` (worker 0 gathers along a tree, updates and
// broadcasts parameters, as Caffe's P2PSync) or `local` (one worker, no exchange).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cgdp/sync/chunk_plan.hpp"
#include "cgdp/sync/host_aggregator.hpp"
#include "cgdp/sync/sync_worker.hpp"
#include "cgdp/sync/topology.hpp"
#include "cgdp/trace/timeline.hpp"

namespace cgdp {

enum class SyncKind { Local, Cgdp, Ps0 };

const char* to_string(SyncKind kind);
// "cgdp", "ps0" or "local"; UsageError otherwise.
SyncKind parse_sync_kind(const std::string& name);

class SyncScheme {
 public:
  virtual ~SyncScheme() = default;
  virtual SyncKind kind() const = 0;
  // Issued on worker w before its first forward of iteration `iteration` (ps0: wait for
  // parameters; cgdp: tell the aggregator which iteration its chunks belong to).
  virtual void begin_iteration(SyncWorker& w, int64_t iteration) {}
  // Issued right after layer `layer`'s backward on worker w, in the iteration's last micro-batch.
  virtual void after_backward(SyncWorker& w, int layer) {}
  // After every worker's backward is issued: finishes the exchange and issues the updates, which
  // apply the summed gradients times `grad_scale`. Throws naming the worker that failed.
  virtual void exchange_and_update(const SyncWorkers& workers, double grad_scale,
                                   int64_t iteration) = 0;
  // Switches to another chunk plan over the same net, between iterations (every stream idle).
  // cgdp only; the sums, hence the parameters, are the same bits under any plan.
  virtual void set_chunk_plan(const ChunkPlan& plan);
  // Host or device time spent summing gradients in the last iteration (µs).
  virtual int64_t last_sum_us() const { return 0; }
  // Stops issuing work from other threads (the aggregator), before the streams are drained.
  virtual void shutdown() {}
  // One line on where the host work runs ("" when the scheme has no host work).
  virtual std::string placement_note() const { return ""; }
  // Bytes of host memory the scheme allocated (pinned buffers).
  virtual int64_t host_bytes() const { return 0; }
};

struct SyncOptions {
  ChunkPlan plan;            // cgdp only
  // cgdp: per param layer (param_layers order), whether its weight travels as sufficient factors
  // (layers/sufficient_factors.hpp); empty: none does. With a reducer the rows are gathered
  // across its hosts.
  std::vector<bool> factored;
  int micro_batches = 1;     // cgdp with factors: micro-batches per iteration (--accumulate)
  // cgdp: the element type the summed chunks travel in (exchange_dtype.hpp).
  ExchangeDtype exchange_dtype = ExchangeDtype::Fp32;
  int host_threads = 0;      // cgdp: OpenMP threads that sum; 0 = all cores
  int sum_lanes = 1;         // cgdp: chunks summed at once, host_threads / sum_lanes each
  // cgdp on one host: each chunk copied up, summed and sent back in pieces of this many KiB of
  // the exchange's dtype as they land (HostAggregator::sum_in_pieces); 0: whole chunks.
  int chunk_piece_kb = 0;
  CoreSet aggregator_cpus;   // cgdp: where the aggregator runs (empty: anywhere)
  ChunkReducer* reducer = nullptr;  // cgdp across hosts: the parameter-server client
  LrPolicy lr;
  SolverSettings solver;
  HistoryPlace history = HistoryPlace::Device;  // where the solvers keep their history
};

// Creates the scheme and gives solvers to the workers that update.
std::unique_ptr<SyncScheme> make_sync_scheme(SyncKind kind, const SyncWorkers& workers,
                                             const SyncOptions& options, Timeline& timeline);

}  // namespace cgdp
