// First-fit placement by liveness (see liveness.hpp).
#include "cgdp/net/liveness.hpp"

#include <algorithm>
#include <map>

namespace cgdp {

bool Occupant::overlaps_in_time(const Occupant& other) const {
  for (const LiveRange& a : live)
    for (const LiveRange& b : other.live)
      if (a.first <= b.last && b.first <= a.last) return true;
  return false;
}

namespace {

// Steps an occupant is alive, over all its stretches.
int64_t steps_alive(const Occupant& o) {
  int64_t steps = 0;
  for (const LiveRange& r : o.live) steps += r.last - r.first + 1;
  return steps;
}

int first_step(const Occupant& o) {
  int first = o.live.empty() ? 0 : o.live.front().first;
  for (const LiveRange& r : o.live) first = std::min(first, r.first);
  return first;
}

// First fit in the given order: each at the lowest offset where it shares no byte with an
// occupant placed before it and alive at the same time. Returns the arena's size.
int64_t place_in_order(const std::vector<Occupant*>& occupants, int64_t align) {
  const auto aligned = [align](int64_t bytes) { return (bytes + align - 1) / align * align; };
  std::vector<const Occupant*> placed;  // by offset: a scan meets the gaps in order
  int64_t total = 0;
  for (Occupant* o : occupants) {
    const int64_t size = aligned(o->bytes);
    int64_t at = 0;
    for (const Occupant* p : placed) {
      if (!p->overlaps_in_time(*o)) continue;
      if (at + size <= p->offset) break;
      at = std::max(at, aligned(p->offset + p->bytes));
    }
    o->offset = at;
    total = std::max(total, at + size);
    placed.insert(
        std::upper_bound(placed.begin(), placed.end(), at,
                         [](int64_t offset, const Occupant* p) { return offset < p->offset; }),
        o);
  }
  return total;
}

}  // namespace

int64_t place_by_liveness(std::vector<Occupant*> occupants, int64_t align) {
  // No one order is best for every net: each of these gave one of the paper's nets in bf16 its
  // smallest arena (AlexNet's and VGG-16's the bytes alive at their fullest step).
  using Before = bool (*)(const Occupant*, const Occupant*);
  const Before orders[] = {
      // Largest first (the big buffers settle the layout, small ones fill the gaps), then the
      // earliest alive among equals.
      [](const Occupant* a, const Occupant* b) {
        return a->bytes != b->bytes ? a->bytes > b->bytes : first_step(*a) < first_step(*b);
      },
      // Largest first, then the longest alive among equals.
      [](const Occupant* a, const Occupant* b) {
        return a->bytes != b->bytes ? a->bytes > b->bytes : steps_alive(*a) > steps_alive(*b);
      },
      // Most bytes x steps first: what holds memory longest settles the layout.
      [](const Occupant* a, const Occupant* b) {
        return a->bytes * steps_alive(*a) > b->bytes * steps_alive(*b);
      },
  };
  int64_t best = -1;
  std::vector<int64_t> best_offsets(occupants.size());
  for (const Before before : orders) {
    std::vector<Occupant*> ordered = occupants;
    std::stable_sort(ordered.begin(), ordered.end(), before);
    const int64_t total = place_in_order(ordered, align);
    if (best >= 0 && total >= best) continue;
    best = total;
    for (size_t i = 0; i < occupants.size(); ++i) best_offsets[i] = occupants[i]->offset;
  }
  for (size_t i = 0; i < occupants.size(); ++i) occupants[i]->offset = best_offsets[i];
  return best;
}

int64_t peak_live_bytes(const std::vector<const Occupant*>& occupants) {
  std::map<int, int64_t> change;  // step -> bytes that become alive (+) or dead (-) there
  for (const Occupant* o : occupants)
    for (const LiveRange& r : o->live) {
      change[r.first] += o->bytes;
      change[r.last + 1] -= o->bytes;
    }
  int64_t alive = 0, peak = 0;
  for (const auto& [step, delta] : change) peak = std::max(peak, alive += delta);
  return peak;
}

}  // namespace cgdp
