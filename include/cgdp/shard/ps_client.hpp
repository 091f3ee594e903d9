// A host's connection to every parameter-server shard: push a summed chunk for an iteration, pull
// the global sum back (the shards send it unasked once every host pushed). Used by the host
// aggregator (ChunkReducer) when scaling out.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cgdp/shard/pulled_chunk.hpp"
#include "cgdp/shard/shard_layout.hpp"

namespace cgdp {

struct PsClientConfig {
  std::vector<std::string> shards;  // shard s's address, e.g. "tcp://10.0.0.2:5601"
  int rank = 0;                     // this host, in [0, num_hosts)
  int num_hosts = 1;
  std::vector<int64_t> chunk_sizes;  // the chunk plan, elements per chunk (same on every host)
  std::string token;                 // the cluster token (load_cluster_token)
  // Every blocking wait (connecting, pull) gives up after this and throws NetworkError naming
  // the shard that did not answer.
  std::chrono::milliseconds timeout{30000};
  PieceLimits limits;  // how chunks are cut (assign_ranges); the same on every host and shard
  // Per chunk, kSummed or the host that gathers it (shard_layout.hpp); empty: every chunk summed.
  std::vector<int> chunk_owners;
};

class PsClient {
 public:
  // Connects to every shard and exchanges hellos (checks the token, the layout and H). Throws
  // NetworkError naming the shard and address that refused the token, rejected the hello or did
  // not answer within the timeout; UsageError for a bad config. The first client or shard of a
  // process fixes glibc's malloc thresholds (src/shard/message_memory.hpp) so receive buffers are
  // reused rather than mapped afresh for every message.
  explicit PsClient(PsClientConfig config);
  // Says bye to every shard (so they stop once all hosts left) and closes the sockets.
  ~PsClient();
  PsClient(const PsClient&) = delete;
  PsClient& operator=(const PsClient&) = delete;

  const ShardLayout& layout() const;

  // Sends chunk `chunk` of iteration `iteration` (count must be the chunk's size) to the shards
  // owning its pieces and returns at once. A gathered chunk is pushed by its owner only. The floats
  // are sent from `data` itself (no copy), so `data` must stay valid and unchanged until pull() of
  // the same (iteration, chunk) returned; when that pull throws, until the client is destroyed
  // (ZeroMQ may still hold the push, zero-copy). Each chunk is pushed once per iteration, and every
  // pushed chunk is pulled. Throws NetworkError if a shard's connection is lost.
  void push(int64_t iteration, int chunk, const float* data, int64_t count);
  // Blocks until the global sum (over hosts 0..H-1 in sum_buffers' fixed order) has come in,
  // and returns it in the buffers ZeroMQ received it into (no copy). Returns once the chunk's
  // pushed `data` is no longer read, so the caller may overwrite it. Throws NetworkError naming
  // the shard when one sent nothing within the timeout, lost its connection or reported an error
  // (a rejected push of this host's, for one). Chunks may be pulled in any order. A gathered
  // chunk comes back as its owner pushed it; this host's own comes back empty (no piece), once
  // its pushed data is no longer read.
  PulledChunk pull(int64_t iteration, int chunk);
  // The same, copied to `out` (which may be the pushed `data`); count must be the chunk's size.
  void pull(int64_t iteration, int chunk, float* out, int64_t count);

  // Threading: push() and pull() may run on two different threads at once (each has its own
  // sockets); calls of the same one are serialized by a lock.

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace cgdp
