// A parameter-server shard: owns a byte-balanced range of the flat gradient vector, sums every
// host's push of each of its pieces in one fixed order (BSP), and sends the sum to every host. A
// gathered piece (one host's rows, e.g. sufficient factors) goes on to every other host unsummed.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cgdp/shard/shard_layout.hpp"

namespace cgdp {

// Where a shard's log lines go (refused connections, rejected messages, hosts joining and
// leaving). Called on the shard's own thread.
using ShardLog = std::function<void(const std::string& line)>;
// Writes "cgdp shard: <line>" to stderr.
void log_to_stderr(const std::string& line);

struct ShardConfig {
  // The only address the shard listens on, ZeroMQ style: "tcp://10.0.0.2:5601"; port "*" picks
  // an ephemeral port (see ShardServer::endpoint()).
  std::string address = "tcp://127.0.0.1:*";
  int shard = 0;  // this shard's index in [0, num_shards)
  int num_shards = 1;
  int num_hosts = 1;  // H: every (iteration, piece) waits for pushes from hosts 0..H-1
  std::vector<int64_t> chunk_sizes;  // the chunk plan, elements per chunk (as every host has it)
  // Per chunk, kSummed or the host that gathers it (its one pusher; the shard sends its pieces to
  // every other host). Empty: every chunk is summed.
  std::vector<int> chunk_owners;
  PieceLimits limits;   // how chunks are cut (assign_ranges); the same on every host and shard
  std::string token;    // the cluster token (load_cluster_token)
  int sum_threads = 1;  // OpenMP threads per sum
  // Stop by itself once every host said bye (kBye); otherwise only stop() ends it.
  bool stop_when_hosts_leave = true;
  ShardLog log = log_to_stderr;
};

// What a shard has seen so far (for tests and the final log line).
struct ShardStats {
  int64_t pieces_summed = 0;  // (iteration, piece) sums completed
  int64_t sums_sent = 0;  // messages: one per host per sum
  int64_t messages_rejected = 0;    // malformed, out of range, unexpected; each got logged
  int64_t connections_refused = 0;  // handshakes whose proof failed (another cluster token)
  std::vector<int> hosts_said_bye;  // their ranks, in the order the byes came
};

class ShardServer {
 public:
  // Binds `config.address` (throws NetworkError naming it when that fails; UsageError for a bad
  // config) and serves on its own thread until stop(), or until every host said bye. Fixes
  // glibc's malloc thresholds for the process, as PsClient does.
  explicit ShardServer(ShardConfig config);
  ~ShardServer();  // stop()
  ShardServer(const ShardServer&) = delete;
  ShardServer& operator=(const ShardServer&) = delete;

  // The bound address with the real port, e.g. "tcp://127.0.0.1:41237".
  const std::string& endpoint() const;
  // Blocks until the shard stopped (all hosts said bye, or stop()); rethrows an error that ended
  // its thread. Returns false when `timeout` passed first.
  bool wait(std::chrono::milliseconds timeout = std::chrono::milliseconds::max());
  // Asks the thread to stop and joins it; sums not sent yet are dropped. Idempotent, any thread.
  void stop();
  ShardStats stats() const;  // any thread

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace cgdp
