// The host aggregator: receives every worker's copy of a gradient chunk in pinned host memory,
// sums the copies with OpenMP threads in a fixed order (worker 0, 1, ...), and sends the sum back
// to every worker on its H2D stream. Host callbacks only call arrived(); all summing happens on
// the aggregator's own threads: one per lane, each summing one ready chunk at a time with its
// share of the OpenMP threads (one lane: chunks are summed one after another with all of them).
// With a ChunkReducer (scale-out), a lane pushes each local sum (in the order the chunks became
// ready) and goes on with the next chunk, while another thread pulls the global sums back in
// push order and issues their H2D copies. With a 16-bit exchange the local sum stays fp32 for the
// shards, and the pulled global sum is narrowed once before its H2D copies.
// A weight that travels as sufficient factors (layers/sufficient_factors.hpp) has a factor slot
// instead: every worker's rows land side by side in one pinned buffer, nothing is summed, and once
// all have arrived each worker receives all of them and rebuilds the summed gradient itself.
// Across hosts, this host's block of rows goes to the shards, which pass it on to the other hosts
// (a gather, exchanged_chunks.hpp), and every host unpacks all H blocks in host order.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <utility>
#include <vector>

#include "cgdp/device/device.hpp"
#include "cgdp/shard/pulled_chunk.hpp"
#include "cgdp/sync/element_range.hpp"
#include "cgdp/sync/exchange_dtype.hpp"
#include "cgdp/sync/factor_block.hpp"
#include "cgdp/sync/topology.hpp"
#include "cgdp/trace/timeline.hpp"

namespace cgdp {

// The most chunks the aggregator sums at once (--sum-lanes).
inline constexpr int kMaxSumLanes = 16;

// A chunk's place in the flat gradient buffer (elements): what it spans, and the parts of it that
// are summed; weights inside it that travel as factors are left out of `parts`.
struct ChunkSpan {
  int64_t offset = 0;
  int64_t count = 0;
  std::vector<ElementRange> parts;  // in order, within [offset, offset + count), non-empty
  int64_t summed_count() const;     // elements in the parts
};

// A chunk whose every element is summed.
ChunkSpan whole_chunk(int64_t offset, int64_t count);

// One weight that travels as sufficient factors: each worker sends `out_count` + `in_count`
// elements (its rows of out_diff, then of in) in the exchange's dtype; every worker receives all N
// workers' rows (N: of every host, H times this host's) at `targets[w]` (device memory, laid out
// [out rows of workers 0..N-1][in rows of workers 0..N-1]), with fp16 each worker's two scales
// (out, in) at `target_scales[w]` (2 N floats), and then `rebuild(w)` is issued on its H2D stream.
struct FactorSlot {
  int64_t out_count = 0;
  int64_t in_count = 0;
  std::vector<void*> targets;  // per worker
  std::function<void(int worker)> rebuild;
  std::vector<float*> target_scales;  // per worker, fp16 only
};

// What the aggregator needs of one worker.
struct AggregatorWorker {
  Device* device = nullptr;
  Stream* h2d = nullptr;         // the sum is copied back on this stream
  float* device_grads = nullptr;  // the worker's flat gradient buffer (device memory)
  // The 16-bit exchange: the sum lands here (device memory, by flat offset) and is widened into
  // device_grads on the H2D stream; fp16's scale of chunk c lands at sum_scales[c].
  uint16_t* landing = nullptr;
  float* sum_scales = nullptr;
};

// Where a locally summed chunk goes before it is sent back: nowhere on one host; to the
// parameter-server shards when scaling out. push() returns at once (the aggregator goes on summing
// the next chunks); pull() of the same (iteration, chunk) later blocks until the global sum has
// come in, and returns once the pushed `sum` is no longer read. `sum` is left untouched in
// between. push() runs on the aggregator's thread, pull() on its pull thread, so the two may run
// at the same time.
class ChunkReducer {
 public:
  virtual ~ChunkReducer() = default;
  virtual void push(int64_t iteration, int chunk, const float* sum, int64_t count) = 0;
  virtual PulledChunk pull(int64_t iteration, int chunk) = 0;
  // This host among the reducer's hosts, all with as many workers: gathered chunks (factor rows,
  // reduced_chunks.hpp) are numbered by it.
  virtual int host_rank() const { return 0; }
  virtual int host_count() const { return 1; }
};

class HostAggregator {
 public:
  // Allocates all host memory now (never per iteration): per worker a pinned receive buffer as
  // large as the summed gradients (the weights sent as factors are left out), and one global
  // buffer. `lanes` (1..kMaxSumLanes) chunks are summed at
  // once, each by threads / lanes OpenMP threads (at least one; threads <= 0: OpenMP's default
  // number split alike). Sums are recorded on `timeline` (track "sum", then "sum lane 1", ... of
  // the aggregator process; "push" and "pull" with a reducer). The aggregator's threads (and the
  // OpenMP teams the lanes start) run on `cpus` when given (the placement's choice).
  // With a reducer, factor slots are gathered across its hosts. With a 16-bit dtype the
  // workers' copies arrive narrowed (exchange_codec.hpp), fp16's with a scale per chunk, and the
  // sum goes back narrowed to each worker's `landing` buffer, where the H2D stream widens it.
  HostAggregator(std::vector<AggregatorWorker> workers, std::vector<ChunkSpan> chunks, int threads,
                 Timeline& timeline, ChunkReducer* reducer = nullptr, CoreSet cpus = {},
                 int lanes = 1, std::vector<FactorSlot> factors = {},
                 ExchangeDtype dtype = ExchangeDtype::Fp32);
  ~HostAggregator();
  HostAggregator(const HostAggregator&) = delete;
  HostAggregator& operator=(const HostAggregator&) = delete;

  // Replaces the chunks (another plan over the same gradients), between iterations only: after
  // wait_all_issued() and before any arrived() of the next iteration. Allocates no host memory
  // beyond the bookkeeping of the new chunk count; the receive buffers are views by offset, so a
  // chunk's sum gives the same bits whatever plan it belongs to. A reducer sees the new chunk
  // numbers from then on (every host must switch alike; the trainer refuses --chunk auto there).
  void set_chunks(std::vector<ChunkSpan> chunks);
  // Pulled global sums are copied into pinned memory before their H2D copies, as on CUDA devices
  // (the default there); on CPU devices they are read where the reducer received them. Lets the
  // CPU backend run the CUDA path. Before the first iteration only.
  void stage_pulled_sums() { copies_from_pulled_ = false; }
  // Sums each chunk in pieces of up to `elements` as they land, so that a piece is summed while
  // it is still in the last-level cache and its sum goes back while the next piece is copied up.
  // Every worker then copies a chunk piece by piece, records piece_landed(w, c, p) after piece p,
  // and calls arrived(w, c) from a host callback after piece 0 and pieces_issued(w, c) once all
  // are issued. The same bits as whole chunks. One host only (no reducer); before the first
  // iteration.
  void sum_in_pieces(int64_t elements);
  int64_t piece_elements() const { return piece_elements_; }  // 0: whole chunks
  const std::vector<ElementRange>& pieces(int chunk) const { return pieces_[chunk]; }
  Event& piece_landed(int worker, int chunk, int piece) {
    return *piece_events_[worker][chunk][piece];
  }
  int num_chunks() const { return static_cast<int>(chunks_.size()); }
  const ChunkSpan& chunk(int c) const { return chunks_[c]; }
  // Where worker w's D2H copy of chunk c must land, for a chunk summed whole (no factored weight
  // in it). fp32 exchange only.
  float* receive_buffer(int worker, int chunk);
  // Where worker w's copy of the flat element `element` (the start of a part) must land, in the
  // exchange's dtype.
  void* receive_at(int worker, int64_t element);
  // fp16: where worker w's scale of chunk c must land.
  float* receive_scale(int worker, int chunk);
  ExchangeDtype dtype() const { return dtype_; }
  int num_factor_slots() const { return static_cast<int>(factors_.size()); }
  // Where worker w's rows of out_diff, and of in, for factor slot s must land (in the dtype);
  // fp16: where its two scales (out, in) must land.
  void* factor_out_buffer(int worker, int slot);
  void* factor_in_buffer(int worker, int slot);
  float* factor_scales(int worker, int slot);

  // The iteration the next chunks belong to (what the reducer is told); call it between
  // iterations, before the first arrival.
  void begin_iteration(int64_t iteration);
  // Called from worker w's D2H host callback once its copy of chunk c has landed (in pieces:
  // its first piece).
  void arrived(int worker, int chunk);
  // In pieces: called by worker w's issuing thread once every piece of chunk c is issued.
  void pieces_issued(int worker, int chunk);
  // Called from worker w's D2H host callback once its factors for slot s have landed.
  void factors_arrived(int worker, int slot);
  // Blocks until every chunk of the current iteration has been summed and its H2D copies
  // issued, then records landed(w) on each worker's H2D stream; rethrows an aggregator error.
  void wait_all_issued();
  // Recorded on worker w's H2D stream after the last H2D copy of the iteration.
  Event& landed(int worker) { return *landed_[worker]; }
  // Whether the thread binding took effect, and why not (after the first sum).
  std::string binding_note() const;
  // Microseconds during which some lane summed, in the iteration wait_all_issued() last
  // completed (overlapping sums count once).
  int64_t last_sum_us() const { return last_sum_us_; }
  // Pinned host memory the aggregator holds: receive buffers, the sums, scales and factor rows.
  int64_t pinned_bytes() const;
  // Makes wait_all_issued() and the aggregator thread give up (a worker failed).
  void abort(std::exception_ptr why);
  // Stops and joins the aggregator's threads; after it, no more copies are issued. A pull in
  // progress ends first (at the latest when the reducer's timeout expires). Idempotent.
  void stop();

 private:
  // Runs `body` on a thread bound to cpus_ until it returns or throws (which aborts);
  // keep_binding: binding_note() reports this thread's binding.
  std::thread start_thread(std::function<void()> body, bool keep_binding);
  void run_sums(int lane);
  // Pushes ready item `item` (a chunk's local sum, or this host's block of factor rows) once every
  // earlier turn has pushed.
  void push_in_turn(int64_t turn, int64_t iteration, int item);
  void run_pulls();
  // Local sums (pushed from here with a reducer), and global sums copied back on CUDA; of the
  // flat element `element` (the start of a part).
  const float* global_sum(int64_t element) const {
    return static_cast<const float*>(global_.get()) + packed(element);
  }
  // Where the flat element `element` (summed, not factored) lies in the receive and sum buffers:
  // its offset less the factored elements before it, which no buffer holds.
  int64_t packed(int64_t element) const;
  // Sums `parts` of chunk c (all its parts, or one piece; `first`: the chunk's first).
  void sum(int lane, int chunk, std::span<const ElementRange> parts, bool first = true);
  // The 16-bit exchange's sum of `parts` of chunk c; fp16: with the first parts, the scale of
  // the chunk's sum.
  void sum_16(int chunk, std::span<const ElementRange> parts, bool first);
  // In pieces: waits for each piece to land on every worker, sums it and sends it back.
  void sum_and_send_pieces(int lane, int chunk);
  void make_pieces();             // pieces_ of chunks_, and the events they need
  void narrow_pulled(int chunk);  // a reducer's fp32 global sum of chunk c into narrowed_
  int64_t summing(int change);  // a sum starts (+1) or ends (-1); returns the time
  // Issues the H2D copies of `parts` of chunk c's sum from global_.
  void send(int chunk, std::span<const ElementRange> parts);
  // The same, narrowed, then each worker's widening; fp16's scale goes with the first parts.
  void send_16(int chunk, std::span<const ElementRange> parts, bool with_scale = true);
  // Issues the H2D copies of chunk c's global sum straight from where the reducer received it.
  void send(int chunk, const PulledChunk& sum);
  // Issues, on every worker's H2D stream, the copies of chunk c's pieces (offsets in the chunk).
  void issue_h2d(int chunk, std::span<const PulledChunk::Piece> pieces);
  // Issues every worker's copy of slot s's gathered factors, then its rebuild.
  void send_factors(int slot);
  // Across hosts: pulls every host's block of slot s and unpacks it beside the others.
  void gather_factors(int64_t iteration, int slot);
  void unpack_block(int slot, int host, const char* block);
  FactorBlock factor_block(const FactorSlot& f) const;  // this host's block of f
  int64_t all_workers() const { return static_cast<int64_t>(workers_.size()) * hosts_; }
  // A ready item: chunk c is c, factor slot s is num_chunks() + s.
  bool is_factor_item(int item) const { return item >= num_chunks(); }
  void count_arrival(int item);
  void make_ready_if_complete(int item);  // under mutex_
  std::vector<AggregatorWorker> workers_;
  std::vector<ChunkSpan> chunks_;
  int64_t total_ = 0;                     // elements of the flat gradient the chunks span
  std::vector<ElementRange> left_out_;    // what no part covers (the factored weights), in order
  std::vector<int64_t> left_out_before_;  // elements in left_out_[0..i), one more than left_out_
  int64_t summed_total_ = 0;              // elements in each receive buffer
  int lane_threads_;   // OpenMP threads per lane
  Timeline& timeline_;
  ChunkReducer* reducer_;
  CoreSet cpus_;
  // CUDA would stage a pageable source once per device; one copy into pinned memory is cheaper.
  bool copies_from_pulled_ = false;
  BindStatus bind_status_;
  std::vector<PinnedHostBuffer> receive_;
  PinnedHostBuffer global_;    // the sums: fp32, or 16-bit without a reducer
  PinnedHostBuffer narrowed_;  // 16-bit exchange with a reducer: the pulled sums, narrowed
  ExchangeDtype dtype_;
  PinnedHostBuffer scales_;  // fp16: [worker][chunk] received scales, then [chunk] the sums'
  int scale_capacity_ = 0;   // chunks the scales have room for
  int hosts_ = 1;            // the reducer's hosts, each with as many workers as this one
  int rank_ = 0;             // this host among them
  std::vector<FactorSlot> factors_;
  std::vector<PinnedHostBuffer> gathered_;  // per factor slot: every worker's rows, side by side
  std::vector<PinnedHostBuffer> blocks_;    // across hosts, per factor slot: this host's block
  std::vector<float> pulled_block_;         // the pull thread's copy of another host's block
  std::vector<PinnedHostBuffer> gathered_scales_;  // fp16, per factor slot: [worker][out, in]
  std::vector<std::unique_ptr<Event>> landed_;

  std::mutex issue_mutex_;  // lanes issue H2D copies one at a time
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<int> arrivals_;  // per item (chunks, then factor slots), this iteration
  std::vector<int> pieces_issued_;  // in pieces: per chunk, workers that issued every piece
  int64_t piece_elements_ = 0;      // 0: whole chunks
  std::vector<std::vector<ElementRange>> pieces_;  // per chunk, in pieces
  std::vector<std::vector<std::vector<std::unique_ptr<Event>>>> piece_events_;  // [w][c][piece]
  std::deque<int> ready_;      // items whose copies have all arrived
  std::deque<std::pair<int64_t, int>> pushed_;  // (iteration, chunk) pushed, not pulled yet
  int64_t iteration_ = 0;
  int issued_ = 0;             // items summed (or gathered) and sent this iteration
  int64_t taken_ = 0;          // ready chunks taken by a lane, ever: each one's turn to push
  int64_t pushed_turns_ = 0;   // turns pushed, ever
  int sums_running_ = 0;
  int64_t summing_since_ = 0;  // when sums_running_ last rose from 0
  int64_t sum_us_ = 0;         // time some lane summed, this iteration
  int64_t last_sum_us_ = 0;
  bool stopping_ = false;
  std::exception_ptr error_;
  std::vector<std::thread> sum_threads_;  // one per lane: sums (and pushes)
  std::thread pull_thread_;               // pulls and sends, with a reducer only
};

}  // namespace cgdp
