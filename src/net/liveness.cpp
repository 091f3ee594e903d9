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
  // Largest first: the big buffers settle the layout, small ones fill the gaps.
  std::stable_sort(occupants.begin(), occupants.end(),
                   [](const Occupant* a, const Occupant* b) { return a->bytes > b->bytes; });
  std::vector<const Occupant*> placed;
  std::vector<std::pair<int64_t, int64_t>> busy;
  int64_t total = 0;
  for (Occupant* o : occupants) {
    const int64_t size = (o->bytes + align - 1) / align * align;
    busy.clear();
    for (const Occupant* p : placed)
      if (p->overlaps_in_time(*o)) busy.emplace_back(p->offset, p->offset + p->bytes);
    std::sort(busy.begin(), busy.end());
    int64_t at = 0;
    for (const auto& [begin, end] : busy) {
      if (at + size <= begin) break;
      at = std::max(at, (end + align - 1) / align * align);
    }
    o->offset = at;
    total = std::max(total, at + size);
    placed.push_back(o);
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
