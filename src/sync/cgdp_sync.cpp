// CGDP (Le et al., ICPE'18, steps B-4-1..B-5-2): as soon as a chunk's last backward is issued,
// the D2H stream waits on an event for it (no host thread blocks), copies the chunk to pinned
// host memory and tells the aggregator from a host callback; the aggregator sums and sends the
// sum back on each H2D stream; every worker's compute stream waits on that before its update.
// A weight sent as sufficient factors leaves right after its own layer's backward: its rows go
// up beside the chunks, every worker gets all workers' rows back on its H2D stream and rebuilds
// the summed weight gradient there with one GEMM (layers/sufficient_factors.hpp). Across hosts
// the rows of every host's workers arrive, and the rebuild reads them all.
#include <algorithm>
#include <map>

#include "cgdp/sync/exchange_codec.hpp"
#include "cgdp/sync/exchanged_chunks.hpp"
#include "cgdp/sync/factor_buffers.hpp"
#include "cgdp/sync/host_aggregator.hpp"
#include "cgdp/sync/host_sum.hpp"
#include "cgdp/sync/sync_scheme.hpp"
#include "cgdp/trace/stream_trace.hpp"

namespace cgdp {

namespace {

// A worker's buffers for the 16-bit exchange (device memory, by flat offset).
struct NarrowBuffers {
  DeviceBuffer staging;  // its chunks narrowed, before their copy to the host
  DeviceBuffer landing;  // the sums, narrowed, before they are widened into the gradients
  DeviceBuffer scales;   // fp16: [chunk] its own scales, then [chunk] the sums'
};

// A worker's buffers for every worker's factor rows of one weight at a time (the H2D stream
// copies and rebuilds one weight after another), sized for the largest (device memory).
struct GatheredBuffers {
  DeviceBuffer rows;        // fp32, what the rebuild reads
  DeviceBuffer narrow;      // 16-bit exchange: where the rows land (bf16 on CUDA: read as such)
  DeviceBuffer own_narrow;  // 16-bit exchange: this worker's rows narrowed before their copy
  DeviceBuffer scales;      // fp16: [slot][out, in] its own scales, then [worker][out, in] all's
};

// One weight sent as factors: its layer on every worker, and where each worker stages its rows.
struct FactoredWeight {
  int layer = 0;  // net layer index
  std::string name;
  std::string d2h_span, rebuild_span;  // timeline names
  std::vector<SufficientFactors<float>*> layers;  // per worker
  std::vector<DeviceBuffer> staging;              // per worker: [out rows][in rows]
  int64_t rows = 0;                               // per worker and iteration
  int64_t out_count = 0, in_count = 0;            // per worker
};

class CgdpSync final : public SyncScheme {
 public:
  CgdpSync(const SyncWorkers& workers, const SyncOptions& o, Timeline& timeline)
      : timeline_(timeline),
        plan_(o.plan),
        dtype_(o.exchange_dtype),
        all_workers_(static_cast<int64_t>(workers.size()) *
                     (o.reducer ? o.reducer->host_count() : 1)),
        host_threads_(o.host_threads),
        chunk_done_(workers.size()) {
    params_ = param_layers(*workers[0].get().net);
    std::vector<AggregatorWorker> agg;
    for (SyncWorker& w : workers) {
      w.solver = std::make_unique<Solver<float>>(*w.net, o.lr, o.solver, o.history, w.index);
      agg.push_back({w.device.get(), w.h2d.get(), w.net->flat_diff().data()});
      if (dtype_ != ExchangeDtype::Fp32) agg.back() = add_narrow_buffers(w, agg.back());
      devices_.push_back(w.device.get());
      h2d_.push_back(w.h2d.get());
    }
    if (!workers[0].get().net->host_flat_data().empty() &&
        (o.reducer || dtype_ != ExchangeDtype::Fp32))
      throw UsageError(
          cat("this run streams weights from host memory (--offload), which are summed "
              "on this host in fp32 only, for now: ",
              o.reducer ? "scale-out needs" : "--exchange-dtype needs fp32 and",
              " a larger --device-memory-gb"));
    factored_ = o.factored.empty() ? std::vector<bool>(params_.size(), false) : o.factored;
    CGDP_ASSERT(factored_.size() == params_.size());
    std::vector<FactorSlot> slots = make_factor_slots(workers, std::max(o.micro_batches, 1));
    std::vector<ChunkSpan> spans = index_plan();
    if (!spans.empty() || !slots.empty())
      aggregator_ = std::make_unique<HostAggregator>(std::move(agg), std::move(spans),
                                                     o.host_threads, timeline, o.reducer,
                                                     o.aggregator_cpus, o.sum_lanes,
                                                     std::move(slots), dtype_);
    if (aggregator_ && o.chunk_piece_kb > 0)
      aggregator_->sum_in_pieces(int64_t{o.chunk_piece_kb} * 1024 / element_bytes(dtype_));
  }

  ~CgdpSync() override {
    for (FactoredWeight& f : factored_weights_)
      for (SufficientFactors<float>* layer : f.layers) layer->stage_factors(nullptr, nullptr);
  }

  void set_chunk_plan(const ChunkPlan& plan) override {
    CGDP_ASSERT(plan.chunks.empty() == plan_.chunks.empty());
    plan_ = plan;
    std::vector<ChunkSpan> spans = index_plan();
    if (aggregator_) aggregator_->set_chunks(std::move(spans));
  }

  SyncKind kind() const override { return SyncKind::Cgdp; }

  void begin_iteration(SyncWorker& w, int64_t iteration) override {
    if (aggregator_ && w.index == 0) aggregator_->begin_iteration(iteration);
  }

  void after_backward(SyncWorker& w, int layer) override {
    if (auto s = slot_of_layer_.find(layer); s != slot_of_layer_.end()) send_factors(w, s->second);
    auto it = chunk_of_layer_.find(layer);
    if (it == chunk_of_layer_.end()) return;
    const int c = it->second;
    const ChunkSpan& span = aggregator_->chunk(c);
    Event& done = *chunk_done_[w.index][c];
    w.compute->record(done);
    w.d2h->wait(done);  // the D2H stream, not a host thread, waits for the chunk's gradients
    HostAggregator* agg = aggregator_.get();
    const int worker = w.index;
    traced(*w.d2h, timeline_, w.index, "d2h", {"d2h chunk ", c}, "d2h",
           [&] { issue_chunk_copies(w, c, span); },
           {{"chunk", c}, {"bytes", span.summed_count() * element_bytes(dtype_)}});
    if (agg->piece_elements() > 0) {
      agg->pieces_issued(worker, c);  // the host callback came after the first piece
      return;
    }
    w.d2h->launch_host_func([agg, worker, c] { agg->arrived(worker, c); });  // hand-off only
  }

  void exchange_and_update(const SyncWorkers& workers, double grad_scale,
                           int64_t iteration) override {
    if (aggregator_) {
      try {
        // Every arrival callback has run once the D2H streams are done (a failed copy throws).
        for (SyncWorker& w : workers) synchronize_stream(w, *w.d2h, "d2h", iteration);
        aggregator_->wait_all_issued();
      } catch (...) {
        aggregator_->abort(std::current_exception());
        throw;
      }
    }
    sum_streamed(workers, iteration);
    for (SyncWorker& w : workers) {
      if (aggregator_) w.compute->wait(aggregator_->landed(w.index));
      mark(*w.compute, timeline_, &w.marks.exchange_end);
      traced(*w.compute, timeline_, w.index, "compute", "update", "update",
             [&] { w.solver->step(*w.compute, grad_scale); });
      mark(*w.compute, timeline_, &w.marks.update_end);
    }
  }

  std::string placement_note() const override {
    return aggregator_ ? "host aggregator " + aggregator_->binding_note() : "";
  }

  void shutdown() override {
    if (aggregator_) aggregator_->stop();
  }

  int64_t last_sum_us() const override { return aggregator_ ? aggregator_->last_sum_us() : 0; }
  int64_t host_bytes() const override { return aggregator_ ? aggregator_->pinned_bytes() : 0; }

 private:
  // The aggregator's chunks for plan_ (exchanged_spans). Maps each exchanged chunk's completing
  // layer to it and makes sure every worker has an event per chunk (events are only ever added,
  // so switching back and forth between plans allocates nothing).
  std::vector<ChunkSpan> index_plan() {
    std::vector<ChunkSpan> spans = exchanged_spans(plan_, params_, factored_);
    chunk_of_layer_.clear();
    size_t next = 0;
    for (const Chunk& chunk : plan_.chunks)
      if (next < spans.size() && spans[next].offset == chunk.offset)
        chunk_of_layer_[chunk.completing_layer] = static_cast<int>(next++);
    CGDP_ASSERT(next == spans.size());
    for (size_t w = 0; w < chunk_done_.size(); ++w)
      while (chunk_done_[w].size() < spans.size())
        chunk_done_[w].push_back(devices_[w]->create_event());
    return spans;
  }

  // Stages every factored weight's rows on each worker and makes its aggregator slot; the
  // workers receive every worker's rows (all hosts') into one device buffer each, large enough
  // for the largest weight's (the H2D stream copies and rebuilds one weight after another).
  std::vector<FactorSlot> make_factor_slots(const SyncWorkers& workers, int micro_batches) {
    for (size_t i = 0; i < params_.size(); ++i) {
      if (!factored_[i]) continue;
      CGDP_ASSERT(params_[i].factorable());
      FactoredWeight f;
      f.layer = params_[i].layer;
      f.name = params_[i].name;
      f.d2h_span = cat("d2h factors ", f.name);
      f.rebuild_span = cat("rebuild ", f.name);
      for (SyncWorker& w : workers) {
        auto* layer = dynamic_cast<SufficientFactors<float>*>(&w.net->layer(f.layer));
        CGDP_ASSERT(layer);
        const FactorShape shape = layer->factor_shape();
        f.rows = shape.rows * micro_batches;
        f.out_count = f.rows * shape.outputs;
        f.in_count = f.rows * shape.inputs;
        f.staging.emplace_back(*w.device,
                               static_cast<size_t>(f.out_count + f.in_count) * sizeof(float));
        auto* rows = static_cast<float*>(f.staging.back().get());
        layer->stage_factors(rows, rows + f.out_count);
        f.layers.push_back(layer);
      }
      slot_of_layer_[f.layer] = static_cast<int>(factored_weights_.size());
      factored_weights_.push_back(std::move(f));
    }
    std::vector<FactorSlot> slots;
    if (factored_weights_.empty()) return slots;
    const int64_t samples = workers[0].get().net->batch_size() * micro_batches;
    const FactorBufferBytes bytes =
        factor_buffer_bytes(params_, factored_, samples, all_workers_, dtype_);
    const size_t slot_count = factored_weights_.size();
    const auto buffer = [](Device& device, int64_t size) {  // size 0: none
      return DeviceBuffer(device, static_cast<size_t>(size));
    };
    for (SyncWorker& w : workers) {
      gathered_.push_back({buffer(*w.device, bytes.gathered), buffer(*w.device, bytes.narrow),
                           buffer(*w.device, bytes.own_narrow), buffer(*w.device, bytes.scales)});
      factors_done_.push_back(std::vector<std::unique_ptr<Event>>());
      for (size_t s = 0; s < slot_count; ++s)
        factors_done_.back().push_back(w.device->create_event());
    }
    for (size_t s = 0; s < slot_count; ++s) {
      FactorSlot slot{factored_weights_[s].out_count, factored_weights_[s].in_count, {}, {}, {}};
      for (GatheredBuffers& g : gathered_) {
        slot.targets.push_back(dtype_ == ExchangeDtype::Fp32 ? g.rows.get() : g.narrow.get());
        slot.target_scales.push_back(static_cast<float*>(g.scales.get()) + 2 * slot_count);
      }
      if (dtype_ != ExchangeDtype::Fp16) slot.target_scales.clear();
      slot.rebuild = [this, s](int worker) { issue_rebuild(worker, static_cast<int>(s)); };
      slots.push_back(std::move(slot));
    }
    return slots;
  }

  // The streamed weights' gradients are on the host already: once every worker's backward has
  // run, each worker's copy becomes their sum, in the aggregator's order (host_sum.hpp). Not yet
  // overlapped with backward: the compute streams are waited for here.
  void sum_streamed(const SyncWorkers& workers, int64_t iteration) {
    if (workers.size() < 2 || workers[0].get().net->host_flat_diff().empty()) return;
    std::vector<const float*> grads;
    for (SyncWorker& w : workers) {
      synchronize_stream(w, *w.compute, "compute", iteration);
      grads.push_back(w.net->host_flat_diff().data());
    }
    const std::span<float> sum = workers[0].get().net->host_flat_diff();
    sum_buffers(sum.data(), grads, static_cast<int64_t>(sum.size()), host_threads_);
    for (size_t w = 1; w < workers.size(); ++w)
      std::copy(sum.begin(), sum.end(), workers[w].get().net->host_flat_diff().begin());
  }

  // Chunk c's parts to the host on w's D2H stream: as they are, or narrowed to 16 bits first
  // (on the same stream, so the compute stream goes on) with fp16's scale.
  void issue_chunk_copies(SyncWorker& w, int c, const ChunkSpan& span) {
    const void* source = w.net->flat_diff().data();
    if (dtype_ != ExchangeDtype::Fp32) {
      const NarrowBuffers& b = narrow_buffers_[w.index];
      source = b.staging.get();
      float* scale = static_cast<float*>(b.scales.get()) + c;
      issue_narrow(*w.d2h, w.device->kind(), dtype_, w.net->flat_diff().data(),
                   static_cast<uint16_t*>(b.staging.get()), span.parts, scale);
      if (dtype_ == ExchangeDtype::Fp16)  // first: the sum of a chunk's first piece needs it
        w.d2h->copy_async(aggregator_->receive_scale(w.index, c), scale, sizeof(float));
    }
    const size_t bytes = element_bytes(dtype_);
    const auto copy = [&](const ElementRange& r) {
      w.d2h->copy_async(aggregator_->receive_at(w.index, r.offset),
                        static_cast<const char*>(source) + r.offset * bytes,
                        static_cast<size_t>(r.count) * bytes);
    };
    if (aggregator_->piece_elements() == 0) {
      for (const ElementRange& part : span.parts) copy(part);
      return;
    }
    HostAggregator* agg = aggregator_.get();
    const int worker = w.index;
    const std::vector<ElementRange>& pieces = agg->pieces(c);
    for (size_t p = 0; p < pieces.size(); ++p) {
      copy(pieces[p]);
      w.d2h->record(agg->piece_landed(worker, c, static_cast<int>(p)));
      if (p == 0) w.d2h->launch_host_func([agg, worker, c] { agg->arrived(worker, c); });
    }
  }

  // The 16-bit exchange's device buffers of worker w (narrow_exchange_bytes): where its chunks are
  // narrowed, where the sums land, and fp16's scales both ways, the sums' after the chunks'.
  AggregatorWorker add_narrow_buffers(SyncWorker& w, AggregatorWorker agg) {
    const size_t chunks = std::max<size_t>(params_.size(), 1);
    const NarrowExchangeBytes bytes = narrow_exchange_bytes(w.net->device_learnable_count(),
                                                            static_cast<int64_t>(params_.size()));
    NarrowBuffers b{DeviceBuffer(*w.device, static_cast<size_t>(bytes.values)),
                    DeviceBuffer(*w.device, static_cast<size_t>(bytes.values)),
                    DeviceBuffer(*w.device, static_cast<size_t>(bytes.scales))};
    agg.landing = static_cast<uint16_t*>(b.landing.get());
    agg.sum_scales = static_cast<float*>(b.scales.get()) + chunks;
    narrow_buffers_.push_back(std::move(b));
    return agg;
  }

  // Right after the factored layer's backward on worker w: its staged rows to the host.
  void send_factors(SyncWorker& w, int s) {
    const FactoredWeight& f = factored_weights_[s];
    Event& done = *factors_done_[w.index][s];
    w.compute->record(done);
    w.d2h->wait(done);
    const auto* rows = static_cast<const float*>(f.staging[w.index].get());
    traced(*w.d2h, timeline_, w.index, "d2h", f.d2h_span, "d2h",
           [&] {
             if (dtype_ == ExchangeDtype::Fp32) {
               w.d2h->copy_async(aggregator_->factor_out_buffer(w.index, s), rows,
                                 static_cast<size_t>(f.out_count) * sizeof(float));
               w.d2h->copy_async(aggregator_->factor_in_buffer(w.index, s), rows + f.out_count,
                                 static_cast<size_t>(f.in_count) * sizeof(float));
             } else {
               send_narrow_factors(w, s, rows);
             }
           },
           {{"factors", s}, {"bytes", (f.out_count + f.in_count) * element_bytes(dtype_)}});
    HostAggregator* agg = aggregator_.get();
    const int worker = w.index;
    w.d2h->launch_host_func([agg, worker, s] { agg->factors_arrived(worker, s); });
  }

  // The 16-bit factors of weight s: narrowed on the D2H stream (fp16: out_diff's rows and in's
  // rows each with a scale of their own, as their magnitudes differ), then copied to the host.
  void send_narrow_factors(SyncWorker& w, int s, const float* rows) {
    const FactoredWeight& f = factored_weights_[s];
    GatheredBuffers& g = gathered_[w.index];
    auto* narrow = static_cast<uint16_t*>(g.own_narrow.get());
    float* scales = static_cast<float*>(g.scales.get()) + 2 * s;
    const DeviceKind kind = w.device->kind();
    issue_narrow(*w.d2h, kind, dtype_, rows, narrow, {{0, f.out_count}}, scales);
    issue_narrow(*w.d2h, kind, dtype_, rows, narrow, {{f.out_count, f.in_count}}, scales + 1);
    w.d2h->copy_async(aggregator_->factor_out_buffer(w.index, s), narrow,
                      static_cast<size_t>(f.out_count) * sizeof(uint16_t));
    w.d2h->copy_async(aggregator_->factor_in_buffer(w.index, s), narrow + f.out_count,
                      static_cast<size_t>(f.in_count) * sizeof(uint16_t));
    if (dtype_ == ExchangeDtype::Fp16)
      w.d2h->copy_async(aggregator_->factor_scales(w.index, s), scales, 2 * sizeof(float));
  }

  // Every worker's 16-bit rows of weight s, landed in worker w's narrow buffer, widened into its
  // fp32 rows on the H2D stream (fp16: each worker's rows by their own scales).
  void issue_widen_factors(int w, int s) {
    const FactoredWeight& f = factored_weights_[s];
    const GatheredBuffers& g = gathered_[w];
    const int64_t n = all_workers_;
    const auto* narrow = static_cast<const uint16_t*>(g.narrow.get());
    auto* rows = static_cast<float*>(g.rows.get());
    const DeviceKind kind = devices_[w]->kind();
    if (dtype_ == ExchangeDtype::Bf16) {
      issue_widen(*h2d_[w], kind, dtype_, narrow, rows, {{0, n * (f.out_count + f.in_count)}},
                  nullptr);
      return;
    }
    const float* scales = static_cast<const float*>(g.scales.get()) + 2 * factored_weights_.size();
    for (int64_t k = 0; k < n; ++k) {
      issue_widen(*h2d_[w], kind, dtype_, narrow, rows, {{k * f.out_count, f.out_count}},
                  scales + 2 * k);
      issue_widen(*h2d_[w], kind, dtype_, narrow, rows,
                  {{n * f.out_count + k * f.in_count, f.in_count}}, scales + 2 * k + 1);
    }
  }

  // On the aggregator's thread, once every worker's rows of weight s are on their way to worker
  // w's gathered buffer (in stream order before this): the rebuild, on w's H2D stream.
  void issue_rebuild(int w, int s) {
    const FactoredWeight& f = factored_weights_[s];
    const int64_t n = all_workers_;
    SufficientFactors<float>* layer = f.layers[w];
    Stream* stream = h2d_[w];
    const int64_t rows = n * f.rows;
    const bool from_bf16 = dtype_ == ExchangeDtype::Bf16 && layer->rebuilds_from_bf16();
    if (dtype_ != ExchangeDtype::Fp32 && !from_bf16) issue_widen_factors(w, s);
    // Every worker's rows: [out rows of workers 0..N-1][in rows of workers 0..N-1].
    const void* gathered = from_bf16 ? gathered_[w].narrow.get() : gathered_[w].rows.get();
    traced(*stream, timeline_, w, "h2d", f.rebuild_span, "h2d", [&] {
      stream->submit([layer, stream, gathered, from_bf16, out_count = n * f.out_count, rows] {
        RunContext ctx;
        ctx.stream = stream;
        if (from_bf16) {
          const auto* outs = static_cast<const uint16_t*>(gathered);
          layer->rebuild_weight_diff_bf16(ctx, outs, outs + out_count, rows);
        } else {
          const auto* outs = static_cast<const float*>(gathered);
          layer->rebuild_weight_diff(ctx, outs, outs + out_count, rows);
        }
      });
    });
  }

  Timeline& timeline_;
  std::vector<Device*> devices_;  // per worker, for the events of a plan with more chunks
  std::vector<Stream*> h2d_;      // per worker
  ChunkPlan plan_;
  ExchangeDtype dtype_;
  int64_t all_workers_;  // whose factor rows every worker receives: this host's, times the hosts
  int host_threads_;     // the aggregator's summing threads (0: OpenMP's default)
  std::vector<NarrowBuffers> narrow_buffers_;  // per worker, with a 16-bit exchange
  std::vector<ParamLayer> params_;
  std::vector<bool> factored_;         // per param layer
  std::map<int, int> chunk_of_layer_;  // net layer completing an exchanged chunk -> chunk
  std::vector<std::vector<std::unique_ptr<Event>>> chunk_done_;  // [worker][chunk]
  std::vector<FactoredWeight> factored_weights_;                 // one per factor slot
  std::map<int, int> slot_of_layer_;                             // net layer -> factor slot
  std::vector<std::vector<std::unique_ptr<Event>>> factors_done_;  // [worker][slot]
  std::vector<GatheredBuffers> gathered_;  // per worker
  std::unique_ptr<HostAggregator> aggregator_;
};

}  // namespace

std::unique_ptr<SyncScheme> make_cgdp_sync(const SyncWorkers& workers, const SyncOptions& o,
                                           Timeline& timeline) {
  return std::make_unique<CgdpSync>(workers, o, timeline);
}

}  // namespace cgdp
