// The network stage: a chunk's push + pull between hosts, from the shard layout.
#include "cgdp/cost/network_stage.hpp"

#include <algorithm>
#include <vector>

#include "cgdp/core/error.hpp"
#include "cgdp/shard/shard_layout.hpp"

namespace cgdp {

// Derivation. Shard s (on host s) owns part b_s of the chunk (sum b_s = B), in p_s pieces. Host h
// sends its pushes of the parts other shards own, B - b_h, and its shard answers the other H - 1
// hosts' pulls of b_h: B + (H - 2) b_h out. It receives the same amount: the other hosts' pushes
// to its shard and its pulls of the remote parts. (Its own part goes through loopback.) Push and
// pull overlap on a full-duplex link (pieces are pipelined, and a later chunk's pushes go out
// while an earlier one's pulls come in), so the stage takes the busier host's one direction:
// h = argmax b_h. A chunk on one shard puts (H - 1) B on its owner's link; one spread evenly over
// all shards 2 (H - 1) / H x B on every link, as a balanced all-reduce.
//
// The cuts inside the chunk depend only on where the chunk lies (an ideal cut inside it is kept
// or moved to one of its ends; a cut elsewhere never falls inside it), so the plan
// {before, chunk, after} gives the chunk the same parts as the real plan.
NetworkTraffic network_traffic(int hosts, int64_t total_bytes, int64_t offset_bytes,
                               int64_t bytes) {
  CGDP_ASSERT(offset_bytes % 4 == 0 && bytes % 4 == 0 && offset_bytes + bytes <= total_bytes);
  if (hosts <= 1 || bytes == 0) return {};
  std::vector<int64_t> sizes;
  for (const int64_t b : {offset_bytes, bytes, total_bytes - offset_bytes - bytes})
    if (b > 0) sizes.push_back(b / 4);
  const ShardLayout layout = assign_ranges(sizes, hosts);
  std::vector<int64_t> part(hosts, 0), pieces(hosts, 0);
  int64_t all_pieces = 0;
  for (const ShardPiece& p : layout.pieces_of_chunk(offset_bytes > 0 ? 1 : 0)) {
    part[p.shard] += p.count * 4;
    ++pieces[p.shard];
    ++all_pieces;
  }
  const int h = static_cast<int>(std::max_element(part.begin(), part.end()) - part.begin());
  return {bytes + (hosts - 2) * part[h], all_pieces + (hosts - 2) * pieces[h], part[h]};
}

double network_us(const CostInputs& in, int64_t offset_bytes, int64_t bytes) {
  const NetworkTraffic t = network_traffic(in.hosts, in.param_bytes(), offset_bytes, bytes);
  if (t.bytes == 0) return 0;
  return static_cast<double>(t.messages) * in.network.latency_us +
         static_cast<double>(t.bytes) * 8 / (in.network.gbps * 1e3) +
         static_cast<double>(t.shard_bytes) / (in.shard_sum_gbps * 1e3);
}

NetworkTraffic gather_traffic(int hosts, int64_t block_bytes) {
  if (hosts <= 1 || block_bytes == 0) return {};
  const int64_t piece_bytes = PieceLimits{}.max_piece * 4;
  const int64_t pieces = (block_bytes + piece_bytes - 1) / piece_bytes;
  return {(hosts - 1) * block_bytes, (hosts - 1) * pieces, 0};
}

double gather_network_us(const CostInputs& in, int64_t block_bytes) {
  const NetworkTraffic t = gather_traffic(in.hosts, block_bytes);
  if (t.bytes == 0) return 0;
  return static_cast<double>(t.messages) * in.network.latency_us +
         static_cast<double>(t.bytes) * 8 / (in.network.gbps * 1e3);
}

}  // namespace cgdp
