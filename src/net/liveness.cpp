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

int64_t place_by_liveness(std::vector<Occupant*> occupants, int64_t align) {
  const auto aligned = [align](int64_t bytes) { return (bytes + align - 1) / align * align; };
  // Largest first: the big buffers settle the layout, small ones fill the gaps.
  std::stable_sort(occupants.begin(), occupants.end(),
                   [](const Occupant* a, const Occupant* b) { return a->bytes > b->bytes; });
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
