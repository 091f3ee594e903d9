// The network stage of a chunk when cgdp spans H hosts (docs/scale-out.md): after the host sum,
// each host pushes its sum to the shards that own the chunk and pulls the global sum back. Its
// time comes from the bytes and messages on the busiest host's link, per the shard layout.
#pragma once

#include <cstdint>

#include "cgdp/cost/cost_inputs.hpp"

namespace cgdp {

// What one chunk puts on the busiest host's link, in each direction (full duplex).
struct NetworkTraffic {
  int64_t bytes = 0;        // per direction
  int64_t messages = 0;     // pieces (at most 1 MiB each) per direction
  int64_t shard_bytes = 0;  // that host's shard's part of the chunk: bytes of one input it sums
};

// The chunk of `bytes` at `offset_bytes` in a flat gradient of `total_bytes` (multiples of 4),
// laid out over `hosts` shards as assign_ranges (shard_layout.hpp) lays out any plan holding it.
// Zero bytes or one host: no traffic.
NetworkTraffic network_traffic(int hosts, int64_t total_bytes, int64_t offset_bytes, int64_t bytes);

// The network stage's time: every message's latency, the bytes at the link's bandwidth, and the
// shard's sum of H inputs over its part (in.shard_sum_gbps). 0 when in.hosts == 1.
double network_us(const CostInputs& in, int64_t offset_bytes, int64_t bytes);

// One factored weight's gather across hosts (sync/exchanged_chunks.hpp): each host pushes its block
// of `block_bytes` and the shards pass it on, unsummed, to the H - 1 others. With the blocks
// spread over the shards, every link carries H - 1 blocks each way, as a balanced all-gather.
NetworkTraffic gather_traffic(int hosts, int64_t block_bytes);
// Its time: the messages' latency and the bytes at the link's bandwidth. 0 when in.hosts == 1.
double gather_network_us(const CostInputs& in, int64_t block_bytes);

}  // namespace cgdp
