// The activation arena's plan (activation_plan.hpp): liveness first, then the host, largest first.
#include "cgdp/net/activation_plan.hpp"

#include <algorithm>

#include "cgdp/core/error.hpp"

namespace cgdp {

namespace {

constexpr int64_t kAlignBytes = 256;  // what cuDNN and vector loads like

int64_t aligned(int64_t bytes) {
  return (bytes + kAlignBytes - 1) / kAlignBytes * kAlignBytes;
}

// Half steps (activation_plan.hpp): a range of whole steps holds both halves of each.
std::vector<LiveRange> in_halves(std::vector<LiveRange> live) {
  for (LiveRange& r : live) r = {2 * r.first, 2 * r.last + 1};
  return live;
}

// What takes arena bytes, in half steps: every unit's values, then the packed units' 16-bit
// copies (dead once widened, in their last step's first half), then the gradients (first written
// by their first step's compute, in its second half); in that order, so that occupant
// k < plan.activations.size() is unit k. Values written over (takes_bytes_of) are their writer's
// occupant's first stretch, begun earlier; theirs holds nothing.
std::vector<Occupant> occupants_of(const ActivationPlan& plan) {
  std::vector<Occupant> occupants;
  occupants.reserve(plan.activations.size() + plan.gradients.size());
  for (const PlannedActivation& a : plan.activations) {
    if (a.written_over >= 0) {
      occupants.push_back({{}, 0, a.offset});
      continue;
    }
    std::vector<LiveRange> live = plan.live(a);
    if (a.takes_bytes_of >= 0) live.front().first = plan.activations[a.takes_bytes_of].produced;
    occupants.push_back({in_halves(std::move(live)), a.bytes, a.offset});
  }
  for (const PlannedActivation& a : plan.activations)
    if (a.packed) {
      std::vector<LiveRange> live = in_halves(plan.pack_live(a));
      if (!a.read_packed) live.back().last = 2 * a.first_backward;  // widened in its first half
      occupants.push_back({std::move(live), ActivationPlan::pack_bytes(a), a.pack_offset});
    }
  for (const PlannedGradient& g : plan.gradients)
    occupants.push_back({{{2 * g.live.first + 1, 2 * g.live.last + 1}}, g.bytes, g.offset});
  return occupants;
}

// Per half step: the bytes alive, and the arena's top (the highest byte a placed occupant holds).
struct HalfSteps {
  std::vector<int64_t> alive, top;
};

HalfSteps half_steps(const ActivationPlan& plan) {
  HalfSteps h{std::vector<int64_t>(static_cast<size_t>(2 * plan.steps), 0),
              std::vector<int64_t>(static_cast<size_t>(2 * plan.steps), 0)};
  for (const Occupant& o : occupants_of(plan))
    for (const LiveRange& r : o.live)
      for (int s = r.first; s <= r.last; ++s) {
        h.alive[s] += o.bytes;
        h.top[s] = std::max(h.top[s], o.offset + o.bytes);
      }
  return h;
}

// The half step at which the placed arena reaches highest, and how high; of those that reach it,
// the one with the most bytes alive (a large unit high up may span many steps).
std::pair<int, int64_t> fullest_half_step(const ActivationPlan& plan) {
  const HalfSteps h = half_steps(plan);
  const int64_t highest = *std::max_element(h.top.begin(), h.top.end());
  int best = 0;
  for (int s = 0; s < static_cast<int>(h.top.size()); ++s)
    if (h.top[s] == highest && (h.top[best] < highest || h.alive[s] > h.alive[best])) best = s;
  return {best, highest};
}

std::pair<int, int64_t> fullest_step(const ActivationPlan& plan) {
  const auto [half, top] = fullest_half_step(plan);
  return {half / 2, top};
}

// The step with the most bytes alive (in either half; the first of equals).
int busiest_step(const ActivationPlan& plan) {
  const std::vector<int64_t> alive = half_steps(plan).alive;
  return static_cast<int>(std::max_element(alive.begin(), alive.end()) - alive.begin()) / 2;
}

// Whether unit `a`, still on the device, could be away on the host at `step`.
bool away_at(const ActivationPlan& plan, const PlannedActivation& a, int step) {
  return !a.offloaded && plan.can_offload(a) && a.last_forward + ActivationPlan::kLag < step &&
         step < plan.fetch_step(a);
}

// The units still on the device that could be away at `step` to bring it down by `excess` bytes:
// the one, or the two, with the fewest bytes to move (a packed one's 16-bit copy) that are enough
// together, else the one with the most; none if none could. Always the largest moved more than a
// slightly larger budget needed, so that more memory could mean more copies.
std::vector<PlannedActivation*> offload_candidates(ActivationPlan& plan, int step, int64_t excess) {
  std::vector<PlannedActivation*> away;
  for (PlannedActivation& a : plan.activations)
    if (away_at(plan, a, step)) away.push_back(&a);
  const auto bytes = [](const PlannedActivation* a) { return ActivationPlan::moved_bytes(*a); };
  std::vector<PlannedActivation*> best;
  int64_t best_bytes = 0;
  const auto consider = [&](std::vector<PlannedActivation*> units, int64_t total) {
    if (total >= excess && (best.empty() || total < best_bytes))
      best = std::move(units), best_bytes = total;
  };
  for (size_t i = 0; i < away.size(); ++i) {
    consider({away[i]}, bytes(away[i]));
    for (size_t j = i + 1; j < away.size(); ++j)
      consider({away[i], away[j]}, bytes(away[i]) + bytes(away[j]));
  }
  if (best.empty() && !away.empty())
    best = {*std::max_element(away.begin(), away.end(),
                              [&](auto* a, auto* b) { return bytes(a) < bytes(b); })};
  return best;
}

int64_t place(ActivationPlan& plan) {
  std::vector<Occupant> occupants = occupants_of(plan);
  std::vector<Occupant*> pointers;
  for (Occupant& o : occupants) pointers.push_back(&o);
  plan.arena_bytes = place_by_liveness(pointers, kAlignBytes);
  size_t k = 0;
  for (PlannedActivation& a : plan.activations) a.offset = occupants[k++].offset;
  for (const PlannedActivation& a : plan.activations)
    if (a.takes_bytes_of >= 0) plan.activations[a.takes_bytes_of].offset = a.offset;
  for (PlannedActivation& a : plan.activations)
    if (a.packed) a.pack_offset = occupants[k++].offset;
  for (PlannedGradient& g : plan.gradients) g.offset = occupants[k++].offset;
  return plan.arena_bytes;
}

int64_t live_peak(const ActivationPlan& plan) {
  const std::vector<Occupant> occupants = occupants_of(plan);
  std::vector<const Occupant*> pointers;
  for (const Occupant& o : occupants) pointers.push_back(&o);
  return peak_live_bytes(pointers);
}

// A unit moved early can be made unnecessary by units moved after it: each comes back to the
// device, the most bytes first, when the arena still fits `limit` without it.
void keep_what_fits(ActivationPlan& plan, int64_t limit) {
  std::vector<PlannedActivation*> units;
  for (PlannedActivation& a : plan.activations)
    if (a.offloaded) units.push_back(&a);
  std::stable_sort(units.begin(), units.end(), [](auto* a, auto* b) {
    return ActivationPlan::moved_bytes(*a) > ActivationPlan::moved_bytes(*b);
  });
  for (PlannedActivation* a : units) {
    a->offloaded = false;
    if (place(plan) > limit) a->offloaded = true;
  }
  place(plan);
}

// Moves each copy back (those needed first in backward first) to the earliest step at which the
// arena still fits `limit`: a copy issued a few small steps before its use cannot hide behind them.
void hoist_fetches(ActivationPlan& plan, int64_t limit) {
  std::vector<PlannedActivation*> units;
  for (PlannedActivation& a : plan.activations)
    if (a.offloaded) units.push_back(&a);
  std::stable_sort(units.begin(), units.end(),
                   [](auto* a, auto* b) { return a->first_backward < b->first_backward; });
  for (PlannedActivation* a : units) {
    a->fetch = plan.fetch_step(*a);
    int earliest = a->last_forward + ActivationPlan::kLag + 2, latest = a->fetch;
    while (earliest < latest) {  // the earliest fetch that fits, if fitting only gets easier later
      const int mid = earliest + (latest - earliest) / 2;
      a->fetch = mid;
      if (place(plan) <= limit)
        latest = mid;
      else
        earliest = mid + 1;
    }
    a->fetch = latest;
  }
  place(plan);
}

// The one, two or three units with the fewest bytes to move that make the arena fit, when they
// move fewer than `plan` does: first fit's gaps can lead the choices above to more. Tries such sets
// away at the busiest step of the plan with nothing moved, the fewest bytes first, a few (threes
// only among the few dozen units a net like AlexNet has there).
void move_fewest_bytes(ActivationPlan& plan, int64_t limit) {
  constexpr int kTrials = 32;
  constexpr size_t kThreesAmong = 64;
  ActivationPlan on_device = plan;
  for (PlannedActivation& a : on_device.activations) a.offloaded = false;
  const int step = busiest_step(on_device);
  const int64_t needed = live_peak(on_device) - limit;  // what must be away at that step
  std::vector<size_t> away;
  for (size_t k = 0; k < on_device.activations.size(); ++k)
    if (away_at(on_device, on_device.activations[k], step)) away.push_back(k);
  const auto bytes = [&](size_t k) {
    return ActivationPlan::moved_bytes(on_device.activations[k]);
  };
  std::vector<std::pair<int64_t, std::vector<size_t>>> choices;  // bytes, units
  const auto consider = [&](std::vector<size_t> units) {
    int64_t total = 0;
    for (const size_t k : units) total += bytes(k);
    if (total >= needed && total < plan.bytes_each_way())
      choices.emplace_back(total, std::move(units));
  };
  for (size_t i = 0; i < away.size(); ++i) {
    consider({away[i]});
    for (size_t j = i + 1; j < away.size(); ++j) {
      consider({away[i], away[j]});
      if (away.size() <= kThreesAmong)
        for (size_t k = j + 1; k < away.size(); ++k) consider({away[i], away[j], away[k]});
    }
  }
  std::stable_sort(choices.begin(), choices.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  if (choices.size() > kTrials) choices.resize(kTrials);
  for (const auto& [total, units] : choices) {
    ActivationPlan trial = on_device;
    for (const size_t k : units) trial.activations[k].offloaded = true;
    if (place(trial) <= limit) {
      plan = std::move(trial);
      return;
    }
  }
}

}  // namespace

std::vector<LiveRange> ActivationPlan::pack_live(const PlannedActivation& a) const {
  const int last = a.read_packed ? a.last_backward : a.first_backward;
  if (a.offloaded) return {{copy_step(a), a.last_forward + kLag}, {fetch_step(a), last}};
  return {{copy_step(a), last}};
}

std::vector<LiveRange> ActivationPlan::live(const PlannedActivation& a) const {
  if (a.only_packed()) return {{a.produced, a.last_forward}};
  if (a.packed) return {{a.produced, a.last_forward}, {a.first_backward, a.last_backward}};
  if (a.offloaded) return {{a.produced, a.last_forward + kLag}, {fetch_step(a), a.last_backward}};
  const int last = a.kept_to_end ? steps - 1 : std::max(a.last_forward, a.last_backward);
  return {{a.produced, last}};
}

bool ActivationPlan::can_pack(const PlannedActivation& a) const {
  return a.packable && !a.kept_to_end && a.first_backward > a.last_forward + 1;
}

int ActivationPlan::packed_count() const {
  return static_cast<int>(std::count_if(activations.begin(), activations.end(),
                                        [](const PlannedActivation& a) { return a.packed; }));
}

int64_t ActivationPlan::packed_bytes() const {
  int64_t bytes = 0;
  for (const PlannedActivation& a : activations)
    if (a.packed) bytes += a.bytes;
  return bytes;
}

int64_t ActivationPlan::rounded_bytes() const {
  int64_t bytes = 0;
  for (const PlannedActivation& a : activations)
    if (a.packed && a.rounds) bytes += a.bytes;
  return bytes;
}

bool ActivationPlan::can_offload(const PlannedActivation& a) const {
  return !a.kept_to_end && a.first_backward >= 0 && fetch_step(a) > a.last_forward + kLag + 1;
}

int ActivationPlan::offloaded_count() const {
  return static_cast<int>(std::count_if(activations.begin(), activations.end(),
                                        [](const PlannedActivation& a) { return a.offloaded; }));
}

int64_t ActivationPlan::bytes_each_way() const {
  int64_t bytes = 0;
  for (const PlannedActivation& a : activations)
    if (a.offloaded) bytes += moved_bytes(a);
  return bytes;
}

CopyOutWaiters copy_out_waiters(const ActivationPlan& plan, const PlannedActivation& a) {
  CopyOutWaiters waiters;
  const int freed = a.last_forward + ActivationPlan::kLag;  // a's bytes are free after this step
  const auto writes = [&](int step) {
    if (step > freed && std::find(waiters.write_steps.begin(), waiters.write_steps.end(), step) ==
                            waiters.write_steps.end())
      waiters.write_steps.push_back(step);
  };
  // The bytes a's copy out reads: its 16-bit copy when packed.
  const int64_t offset = ActivationPlan::moved_offset(a), bytes = ActivationPlan::moved_bytes(a);
  for (size_t i = 0; i < plan.activations.size(); ++i) {
    const PlannedActivation& b = plan.activations[i];
    if (b.packed && bytes_overlap(offset, bytes, b.pack_offset, ActivationPlan::pack_bytes(b)))
      writes(ActivationPlan::copy_step(b));  // its 16-bit copy is written there
    if (bytes_overlap(offset, bytes, b.offset, b.bytes)) {
      writes(b.produced);
      if (b.packed && !b.read_packed) writes(b.first_backward);  // widened there
    }
    if (b.offloaded && plan.fetch_step(b) > freed &&
        bytes_overlap(offset, bytes, ActivationPlan::moved_offset(b),
                      ActivationPlan::moved_bytes(b)))
      waiters.fetched.push_back(static_cast<int>(i));
  }
  for (const PlannedGradient& g : plan.gradients)  // first written by its last reader's backward
    if (bytes_overlap(offset, bytes, g.offset, g.bytes)) writes(g.live.first);
  return waiters;
}

ArenaPeak arena_peak(const ActivationPlan& plan) {
  ArenaPeak peak;
  if (plan.steps == 0) return peak;
  const auto [half, top] = fullest_half_step(plan);
  peak.step = half / 2;
  peak.bytes = top;
  const std::vector<Occupant> occupants = occupants_of(plan);
  std::vector<std::string> names;  // in occupants_of's order
  for (const PlannedActivation& a : plan.activations)
    names.push_back(a.takes_bytes_of < 0
                        ? a.name
                        : cat(plan.activations[a.takes_bytes_of].name, ", then ", a.name));
  for (const PlannedActivation& a : plan.activations)
    if (a.packed) names.push_back(cat(a.name, " (16 bits)"));
  for (const PlannedGradient& g : plan.gradients) names.push_back(g.name);
  for (size_t k = 0; k < occupants.size(); ++k)
    for (const LiveRange& r : occupants[k].live)
      if (r.first <= half && half <= r.last) peak.holders.push_back({names[k], occupants[k].bytes});
  std::stable_sort(peak.holders.begin(), peak.holders.end(),
                   [](const auto& a, const auto& b) { return a.bytes > b.bytes; });
  return peak;
}

ActivationPlan plan_activation_arena(std::vector<PlannedActivation> activations, int steps,
                                     int64_t limit, std::vector<PlannedGradient> gradients) {
  ActivationPlan plan;
  plan.steps = steps;
  plan.activations = std::move(activations);
  plan.gradients = std::move(gradients);
  for (PlannedActivation& a : plan.activations) a.packed = plan.can_pack(a);
  for (const PlannedActivation& a : plan.activations)
    if (a.takes_bytes_of >= 0) {
      PlannedActivation& over = plan.activations[a.takes_bytes_of];
      CGDP_ASSERT(over.only_packed() && over.last_forward == a.produced &&
                  over.produced < a.produced && over.bytes == a.bytes);
      over.written_over = a.produced;
    }
  // Cheap bound first: while the bytes alive at the busiest step exceed the limit, no placement
  // fits.
  for (int64_t peak; (peak = live_peak(plan)) > limit;) {
    const std::vector<PlannedActivation*> units =
        offload_candidates(plan, busiest_step(plan), peak - limit);
    if (units.empty()) break;
    for (PlannedActivation* a : units) a->offloaded = true;
  }
  for (int64_t top;
       (top = place(plan)) > limit;) {  // first fit leaves gaps: free where it's highest
    const std::vector<PlannedActivation*> units =
        offload_candidates(plan, fullest_step(plan).first, top - limit);
    if (units.empty()) break;
    for (PlannedActivation* a : units) a->offloaded = true;
  }
  keep_what_fits(plan, std::max(limit, plan.arena_bytes));
  if (plan.arena_bytes <= limit && plan.offloaded_count() > 0) move_fewest_bytes(plan, limit);
  hoist_fetches(plan, std::max(limit, plan.arena_bytes));
  for (PlannedActivation& a : plan.activations)
    if (a.offloaded) {
      a.host_offset = plan.host_bytes;
      plan.host_bytes += aligned(ActivationPlan::moved_bytes(a));
    }
  return plan;
}

}  // namespace cgdp
