// Sync scheme names, the factory, and `local` (one worker: no exchange).
#include "cgdp/sync/sync_scheme.hpp"

#include "cgdp/trace/stream_trace.hpp"

namespace cgdp {

std::unique_ptr<SyncScheme> make_cgdp_sync(const SyncWorkers&, const SyncOptions&, Timeline&);
std::unique_ptr<SyncScheme> make_ps0_sync(const SyncWorkers&, const SyncOptions&, Timeline&);

const char* to_string(SyncKind kind) {
  switch (kind) {
    case SyncKind::Cgdp: return "cgdp";
    case SyncKind::Ps0: return "ps0";
    default: return "local";
  }
}

SyncKind parse_sync_kind(const std::string& name) {
  if (name == "cgdp") return SyncKind::Cgdp;
  if (name == "ps0") return SyncKind::Ps0;
  if (name == "local") return SyncKind::Local;
  throw UsageError(cat("--sync: unknown scheme '", name, "' (known: cgdp, ps0, local)"));
}

void SyncScheme::set_chunk_plan(const ChunkPlan&) {
  throw UsageError(
      cat("--sync ", to_string(kind()), " exchanges no chunks: chunk plans need --sync cgdp"));
}

namespace {

class LocalSync final : public SyncScheme {
 public:
  LocalSync(SyncWorker& w, const SyncOptions& o, Timeline& timeline) : timeline_(timeline) {
    w.solver = std::make_unique<Solver<float>>(*w.net, o.lr, o.solver, o.history, w.index);
  }
  SyncKind kind() const override { return SyncKind::Local; }
  void exchange_and_update(const SyncWorkers& workers, double grad_scale, int64_t) override {
    SyncWorker& w = workers[0];
    mark(*w.compute, timeline_, &w.marks.exchange_end);
    traced(*w.compute, timeline_, w.index, "compute", "update", "update",
           [&] { w.solver->step(*w.compute, grad_scale); });
    mark(*w.compute, timeline_, &w.marks.update_end);
  }

 private:
  Timeline& timeline_;
};

}  // namespace

std::unique_ptr<SyncScheme> make_sync_scheme(SyncKind kind, const SyncWorkers& workers,
                                             const SyncOptions& options, Timeline& timeline) {
  switch (kind) {
    case SyncKind::Cgdp: return make_cgdp_sync(workers, options, timeline);
    case SyncKind::Ps0:
      return make_ps0_sync(workers, options, timeline);
    default:
      if (workers.size() != 1) throw UsageError("--sync local needs exactly one device");
      return std::make_unique<LocalSync>(workers[0], options, timeline);
  }
}

}  // namespace cgdp
