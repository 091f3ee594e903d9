// CGDP (Le et al., ICPE'18, steps B-4-1..B-5-2): as soon as a chunk's last backward is issued,
// the D2H stream waits on an event for it (no host thread blocks), copies the chunk to pinned
// host memory and tells the aggregator from a host callback; the aggregator sums and sends the
// sum back on each H2D stream; every worker's compute stream waits on that before its update.
#include <map>

#include "cgdp/sync/host_aggregator.hpp"
#include "cgdp/sync/sync_scheme.hpp"
#include "cgdp/train/stream_trace.hpp"

namespace cgdp {

namespace {

class CgdpSync final : public SyncScheme {
 public:
  CgdpSync(std::vector<Worker>& workers, const SyncOptions& o, Timeline& timeline)
      : timeline_(timeline), plan_(o.plan), chunk_done_(workers.size()) {
    std::vector<AggregatorWorker> agg;
    for (Worker& w : workers) {
      w.solver = std::make_unique<Solver<float>>(*w.net, o.lr, o.solver);
      agg.push_back({w.device.get(), w.h2d.get(), w.net->flat_diff().data()});
      devices_.push_back(w.device.get());
    }
    std::vector<ChunkSpan> spans = index_plan();
    if (!spans.empty())
      aggregator_ =
          std::make_unique<HostAggregator>(std::move(agg), std::move(spans), o.host_threads,
                                           timeline, o.reducer, o.aggregator_cpus, o.sum_lanes);
  }

  void set_chunk_plan(const ChunkPlan& plan) override {
    CGDP_ASSERT(plan.chunks.empty() == plan_.chunks.empty());
    plan_ = plan;
    std::vector<ChunkSpan> spans = index_plan();
    if (aggregator_) aggregator_->set_chunks(std::move(spans));
  }

  SyncKind kind() const override { return SyncKind::Cgdp; }

  void begin_iteration(Worker& w, int64_t iteration) override {
    if (aggregator_ && w.index == 0) aggregator_->begin_iteration(iteration);
  }

  void after_backward(Worker& w, int layer) override {
    auto it = chunk_of_layer_.find(layer);
    if (it == chunk_of_layer_.end()) return;
    const int c = it->second;
    const Chunk& chunk = plan_.chunks[c];
    Event& done = *chunk_done_[w.index][c];
    w.compute->record(done);
    w.d2h->wait(done);  // the D2H stream, not a host thread, waits for the chunk's gradients
    const float* src = w.net->flat_diff().data() + chunk.offset;
    float* dst = aggregator_->receive_buffer(w.index, c);
    traced(*w.d2h, timeline_, w.index, "d2h", {"d2h chunk ", c}, "d2h",
           [&] { w.d2h->copy_async(dst, src, static_cast<size_t>(chunk.count) * sizeof(float)); },
           {{"chunk", c}, {"bytes", chunk.count * 4}});
    HostAggregator* agg = aggregator_.get();
    const int worker = w.index;
    w.d2h->launch_host_func([agg, worker, c] { agg->arrived(worker, c); });  // hand-off only
  }

  void exchange_and_update(std::vector<Worker>& workers, double grad_scale, int64_t iteration) override {
    if (aggregator_) {
      try {
        // Every arrival callback has run once the D2H streams are done (a failed copy throws).
        for (Worker& w : workers) synchronize_stream(w, *w.d2h, "d2h", iteration);
        aggregator_->wait_all_issued();
      } catch (...) {
        aggregator_->abort(std::current_exception());
        throw;
      }
    }
    for (Worker& w : workers) {
      if (aggregator_) w.compute->wait(aggregator_->landed(w.index));
      mark(*w.compute, timeline_, &w.marks.exchange_end);
      traced(*w.compute, timeline_, w.index, "compute", "update", "update",
             [&] { w.solver->step(*w.compute, grad_scale); });
      mark(*w.compute, timeline_, &w.marks.update_end);
    }
  }

  // Maps each chunk's completing layer to it and makes sure every worker has an event per chunk
  // (events are only ever added, so switching back and forth between plans allocates nothing).
  std::vector<ChunkSpan> index_plan() {
    std::vector<ChunkSpan> spans;
    chunk_of_layer_.clear();
    for (size_t c = 0; c < plan_.chunks.size(); ++c) {
      spans.push_back({plan_.chunks[c].offset, plan_.chunks[c].count});
      chunk_of_layer_[plan_.chunks[c].completing_layer] = static_cast<int>(c);
    }
    for (size_t w = 0; w < chunk_done_.size(); ++w)
      while (chunk_done_[w].size() < spans.size())
        chunk_done_[w].push_back(devices_[w]->create_event());
    return spans;
  }

  std::string placement_note() const override {
    return aggregator_ ? "host aggregator " + aggregator_->binding_note() : "";
  }

  void shutdown() override {
    if (aggregator_) aggregator_->stop();
  }

  int64_t last_sum_us() const override { return aggregator_ ? aggregator_->last_sum_us() : 0; }
  int64_t host_bytes() const override {
    if (!aggregator_) return 0;
    const ChunkSpan& last = aggregator_->chunk(aggregator_->num_chunks() - 1);
    return (last.offset + last.count) * 4 * static_cast<int64_t>(chunk_done_.size() + 1);
  }

 private:
  Timeline& timeline_;
  std::vector<Device*> devices_;  // per worker, for the events of a plan with more chunks
  ChunkPlan plan_;
  std::map<int, int> chunk_of_layer_;  // net layer completing a chunk -> chunk
  std::vector<std::vector<std::unique_ptr<Event>>> chunk_done_;  // [worker][chunk]
  std::unique_ptr<HostAggregator> aggregator_;
};

}  // namespace

std::unique_ptr<SyncScheme> make_cgdp_sync(std::vector<Worker>& workers, const SyncOptions& o,
                                           Timeline& timeline) {
  return std::make_unique<CgdpSync>(workers, o, timeline);
}

}  // namespace cgdp
