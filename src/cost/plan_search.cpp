// Best chunk plan: dynamic programming over the chunk pipeline's per-stage finish times.
#include "cgdp/cost/plan_search.hpp"

#include <algorithm>
#include <array>
#include <limits>

#include "cgdp/core/error.hpp"
#include "cgdp/cost/chunk_stages.hpp"
#include "cgdp/sync/host_aggregator.hpp"

namespace cgdp {

namespace {

constexpr int kMaxStages = 8;
constexpr int kMaxSlots = kMaxStages + kMaxSumLanes;  // a slot per lane of each stage
using Times = std::array<double, kMaxStages>;
using Slots = std::array<double, kMaxSlots>;

// What a chunk of param layers costs: each of its pieces' stage times, the pieces, and the
// compute time its exchange takes from the workers.
struct Durations {
  Times stage{};  // one piece's
  int pieces = 1;
  double taken_us = 0;
};

// Where the pipeline stands after some chunks: what the next chunk's times depend on.
struct State {
  double compute = 0;  // the compute stream has run the last chunk's sync point
  Slots free{};        // per stage, each lane's last finish, ascending within the stage
  int chunks = 0;
  int from = 0;     // the last chunk starts at this param layer
  int parent = -1;  // the state before it, in the front of `from` layers covered
};

// The chunk pipeline with workers at the same pace: chunk c's stage k starts when its stage k-1
// has finished and a lane of stage k is free (one lane: chunk c-1's stage k has finished). This
// is what simulate_cgdp's event simulation does when every worker runs the same times.
class Pipeline {
 public:
  explicit Pipeline(const CostInputs& in) : in_(in), prefix_(1, 0.0) {
    for (const StageCost& stage : chunk_stages(in, 0, 0)) {
      first_slot_.push_back(slots_);
      lanes_.push_back(stage.per_worker ? 1 : stage.lanes);
      slots_ += lanes_.back();
    }
    stages_ = static_cast<int>(lanes_.size());
    CGDP_ASSERT(stages_ <= kMaxStages && slots_ <= kMaxSlots);
    for (const ParamCost& p : in.params) prefix_.push_back(prefix_.back() + p.backward_us);
  }

  int stages() const { return stages_; }
  int slots() const { return slots_; }

  // Stage times of the chunk of param layers [first, last] (stretched but for the last chunk),
  // and the compute time its exchange takes from the workers (contention_us on shared cores,
  // and overlap_us).
  Durations durations(int first, int last) const {
    const int64_t offset = in_.params[first].layer.offset;
    const int64_t bytes = in_.summed_bytes(first, last);  // factored weights go apart (ignored)
    Durations d;
    d.pieces = chunk_pieces(in_, bytes);
    const int64_t piece = bytes / d.pieces;
    const auto list = chunk_stages(in_, offset * 4, piece);
    const bool beside = last + 1 < in_.num_params();
    const auto timed = beside ? beside_layers(in_, list) : list;
    for (int k = 0; k < stages_; ++k) d.stage[k] = stage_us(in_, timed[k]);
    d.taken_us = d.pieces * (contention_us(in_, list) + overlap_us(in_, in_.wire_bytes(piece)));
    return d;
  }

  State advance(const State& s, int first, int last, const Durations& d) const {
    State next = s;
    next.compute = s.compute + prefix_[last + 1] - prefix_[first] + in_.sync_us;
    Times done{};  // each stage's finish of the previous piece
    for (int p = 0; p < d.pieces; ++p) {
      double t = next.compute;
      for (int k = 0; k < stages_; ++k) {
        // The lane free first takes the chunk, all of its pieces one after another.
        const double free = p == 0 ? next.free[first_slot_[k]] : done[k];
        t = std::max(t, free) + d.stage[k];
        done[k] = t;
      }
    }
    for (int k = 0; k < stages_; ++k) {  // the stage's lanes stay ascending
      double* lane = next.free.data() + first_slot_[k];
      int i = 0;
      for (; i + 1 < lanes_[k] && lane[i + 1] < done[k]; ++i) lane[i] = lane[i + 1];
      lane[i] = done[k];
    }
    // As simulate_cgdp: the exchange slows the compute after the chunk is ready, but the last's.
    if (last + 1 < in_.num_params()) next.compute += d.taken_us;
    // Every later chunk reaches a stage after next.compute, so a lane free earlier is as good as
    // one free then: the same state for the future, and fewer states kept.
    for (int k = 0; k < slots_; ++k) next.free[k] = std::max(next.free[k], next.compute);
    ++next.chunks;
    next.from = first;
    return next;
  }

  // Backward start to the end of the exchange once every layer is in a chunk.
  double finish(const State& s) const {
    const double compute_end = s.compute + in_.tail_backward_us;
    return stages_ == 0 ? compute_end : std::max(compute_end, last_finish(s, stages_ - 1));
  }

  // No completion of `s` (covering `covered` layers) can finish before this: the rest of the
  // backward, and the last chunk (which holds the last layer) through every stage.
  // (`last_layer`: a lower bound on each stage's time for the first piece of such a chunk.)
  double lower_bound(const State& s, int covered, const Times& last_layer) const {
    const int n = in_.num_params();
    if (covered == n) return finish(s);
    double tail = 0, bound = 0;
    for (int k = stages_ - 1; k >= 0; --k) {
      tail += last_layer[k];
      bound = std::max(bound, s.free[first_slot_[k]] + tail);  // its first free lane
    }
    const double ready = s.compute + prefix_[n] - prefix_[covered] + in_.sync_us;
    return std::max({bound, ready + tail, ready + in_.tail_backward_us});
  }

 private:
  // Stage k's last finish: its lane that finished last.
  double last_finish(const State& s, int k) const { return s.free[first_slot_[k] + lanes_[k] - 1]; }

  const CostInputs& in_;
  int stages_ = 0;
  int slots_ = 0;
  std::vector<int> first_slot_, lanes_;  // per stage
  std::vector<double> prefix_;           // backward time of the first i param layers
};

// Lane by lane within a stage (both ascending): sound, as a lane freed no later frees every
// later chunk no later.
bool dominates(const State& a, const State& b, int slots) {
  if (a.compute > b.compute || a.chunks > b.chunks) return false;
  for (int k = 0; k < slots; ++k)
    if (a.free[k] > b.free[k]) return false;
  return true;
}

// Adds `s` to a Pareto front unless a kept state dominates it; drops those it dominates.
void insert(std::vector<State>& front, const State& s, int slots) {
  for (const State& kept : front)
    if (dominates(kept, s, slots)) return;
  std::erase_if(front, [&](const State& kept) { return dominates(s, kept, slots); });
  front.push_back(s);
}

std::vector<ParamLayer> layers_of(const CostInputs& in) {
  std::vector<ParamLayer> layers;
  for (const ParamCost& p : in.params) layers.push_back(p.layer);
  return layers;
}

PlanChoice choice(const CostInputs& in, ChunkPlan plan) {
  PlanChoice c;
  c.exchange_end_us = exchange_end_us(in, plan);
  c.iteration_us = in.forward_us + c.exchange_end_us + update_us(in);
  c.spec = plan_spec(plan, in.num_params());
  c.plan = std::move(plan);
  return c;
}

// Chunk starts of the best full plan in `fronts`.
std::vector<int64_t> best_starts(const std::vector<std::vector<State>>& fronts,
                                 const Pipeline& pipe) {
  const auto& last = fronts.back();
  CGDP_ASSERT(!last.empty());
  double fastest = std::numeric_limits<double>::infinity();
  for (const State& s : last) fastest = std::min(fastest, pipe.finish(s));
  const State* best = nullptr;  // the fewest chunks among the fastest, up to rounding
  for (const State& s : last)
    if (pipe.finish(s) <= fastest * (1 + 1e-12) && (!best || s.chunks < best->chunks)) best = &s;
  std::vector<int64_t> starts;
  for (const State* s = best; s->parent >= 0; s = &fronts[s->from][s->parent])
    if (s->from > 0) starts.push_back(s->from);
  std::reverse(starts.begin(), starts.end());
  return starts;
}

}  // namespace

std::string plan_spec(const ChunkPlan& plan, int num_layers) {
  const size_t n = plan.chunks.size();
  if (n <= 1) return "all";
  if (n == static_cast<size_t>(num_layers)) return "layer";
  std::string spec;
  for (size_t c = 1; c < n; ++c) spec += cat(c > 1 ? "," : "", plan.chunks[c].first);
  return n == 2 ? spec + "," : spec;  // "b1" alone would mean an equal-size K
}

double exchange_end_us(const CostInputs& in, const ChunkPlan& plan) {
  if (!in.exchanges()) return in.backward_total_us();  // `local`: no exchange
  const Pipeline pipe(in);
  State s;
  for (const Chunk& c : plan.chunks)
    s = pipe.advance(s, c.first, c.last, pipe.durations(c.first, c.last));
  return pipe.finish(s);
}

PlanSearchResult best_plan(const CostInputs& in) {
  PlanSearchResult result;
  const std::vector<ParamLayer> layers = layers_of(in);
  const int n = in.num_params();
  if (n == 0) {
    result.best = result.best_equal_size = choice(in, ChunkPlan{});
    return result;
  }
  for (int k = 1; k <= n; ++k) {
    result.equal_size.push_back(choice(in, equal_size_plan(layers, k)));
    result.equal_size.back().spec = std::to_string(k);  // the paper's K, as --chunk takes it
  }
  if (!in.exchanges()) {  // one worker runs `local`: every plan costs the same
    result.best = choice(in, single_chunk_plan(layers));
    result.best_equal_size = result.equal_size.front();
    return result;
  }
  result.best_equal_size = *std::min_element(result.equal_size.begin(), result.equal_size.end(),
                                             [](const PlanChoice& a, const PlanChoice& b) {
                                               return a.exchange_end_us < b.exchange_end_us;
                                             });
  double bound = result.best_equal_size.exchange_end_us;  // a plan known to reach this
  const Pipeline pipe(in);
  // Each stage's least time over the chunks that can hold the last layer (not just that layer
  // alone: the network stage's time depends on where a chunk lies, not only on its size).
  Times last_layer = pipe.durations(n - 1, n - 1).stage;
  for (int from = 0; from < n - 1; ++from) {
    const Durations d = pipe.durations(from, n - 1);
    for (int k = 0; k < pipe.stages(); ++k) last_layer[k] = std::min(last_layer[k], d.stage[k]);
  }
  std::vector<std::vector<State>> fronts(n + 1);
  fronts[0].push_back(State{});
  for (int covered = 1; covered <= n; ++covered) {
    const Durations rest = covered < n ? pipe.durations(covered, n - 1) : Durations{};
    for (int from = 0; from < covered; ++from) {
      const Durations d = pipe.durations(from, covered - 1);
      for (size_t i = 0; i < fronts[from].size(); ++i) {
        State s = pipe.advance(fronts[from][i], from, covered - 1, d);
        s.parent = static_cast<int>(i);
        if (pipe.lower_bound(s, covered, last_layer) > bound * (1 + 1e-12)) continue;
        if (covered < n)  // finishing with one more chunk is a real plan: a tighter bound
          bound = std::min(bound, pipe.finish(pipe.advance(s, covered, n - 1, rest)));
        insert(fronts[covered], s, pipe.slots());
      }
    }
    if (in.sum_lanes > 1 && fronts[covered].size() > kMaxFrontStates) {  // the most promising
      auto& front = fronts[covered];  // (later fronts index into it; none does yet)
      std::sort(front.begin(), front.end(), [&](const State& a, const State& b) {
        return pipe.lower_bound(a, covered, last_layer) < pipe.lower_bound(b, covered, last_layer);
      });
      front.resize(kMaxFrontStates);
      result.exact = false;
    }
    result.states_explored += static_cast<int64_t>(fronts[covered].size());
  }
  // A cut front may have dropped every way to beat the equal-size plans (the bound came from one).
  if (fronts.back().empty()) {
    result.best = result.best_equal_size;
    return result;
  }
  result.best = choice(in, plan_from_starts(layers, best_starts(fronts, pipe)));
  if (!result.exact && result.best_equal_size.iteration_us < result.best.iteration_us)
    result.best = result.best_equal_size;
  return result;
}

}  // namespace cgdp
