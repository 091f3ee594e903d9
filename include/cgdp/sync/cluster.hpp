// This host's part in a multi-host run: its parameter-server shard (listening only on its own
// entry of the host list) and its client of every host's shard. The host aggregator pushes and
// pulls gradient chunks through it; it also carries the two other exchanges training needs:
// agreeing where to start, and gathering every worker's BatchNorm statistics.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cgdp/shard/ps_client.hpp"
#include "cgdp/shard/shard_server.hpp"
#include "cgdp/sync/host_aggregator.hpp"
#include "cgdp/sync/host_list.hpp"

namespace cgdp {

struct ClusterConfig {
  std::vector<HostPort> hosts;  // rank r's shard listens on hosts[r]
  int rank = 0;
  std::string token;  // load_cluster_token()
  std::chrono::milliseconds timeout{30000};
  std::vector<int64_t> chunk_sizes;  // the gradient chunk plan (elements per chunk)
  std::vector<int>
      chunk_owners;  // per chunk: kSummed, or the host it is gathered from; empty: all summed
  int64_t state_floats = 0;          // layer state of all of one host's workers (gather_state)
  int sum_threads = 1;               // threads the shard sums with
  ShardLog log = log_to_stderr;      // the shard's log lines
};

// One setting a host states and every host must share, e.g. {"start iteration", 500}: an integer
// or a float, shown as they are when they differ, or a digest of text (a hash), which can only be
// said to differ.
struct Agreed {
  enum class Kind { kInteger, kFloat, kDigest };
  std::string name;
  int64_t value = 0;
  Kind kind = Kind::kInteger;

  Agreed(std::string name, int64_t value) : name(std::move(name)), value(value) {}
  static Agreed real(std::string name, float value);
  static Agreed digest(std::string name, std::string_view text);
};
using Agreement = std::vector<Agreed>;

class Cluster final : public ChunkReducer {
 public:
  // Starts this host's shard, then connects to every shard, waiting up to the timeout for the
  // other hosts to start. Throws NetworkError naming a host that cannot be reached or refused
  // the token, UsageError for a bad host list.
  explicit Cluster(ClusterConfig config);
  // Without finish(): leaves at once (after a failure, nobody waits for the others).
  ~Cluster() override;
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  int rank() const { return config_.rank; }
  int num_hosts() const { return static_cast<int>(config_.hosts.size()); }
  int host_rank() const override { return rank(); }
  int host_count() const override { return num_hosts(); }
  // "host 1 (10.0.0.2:29601)".
  std::string host_name(int rank) const;

  // ChunkReducer: gradient chunk c of an iteration to the shards owning it, and its global sum
  // (hosts 0, 1, ... added in that order) back.
  void push(int64_t iteration, int chunk, const float* sum, int64_t count) override;
  PulledChunk pull(int64_t iteration, int chunk) override;

  // Every host states the same names in the same order; throws UsageError naming the first value
  // that differs from host 0's and both hosts (after every host has seen it: finish()). Integers
  // outside [0, 2^48) are compared (and reported) hashed into that range.
  void agree(const Agreement& mine);
  // Every host's `mine` (state_floats values each), in host order: each host's values exactly.
  std::vector<float> gather_state(std::span<const float> mine);

  // The run ended well here: says bye to every shard, then keeps this host's shard serving until
  // every other host said bye too (or the timeout passed), so no host misses its last sums.
  void finish();

 private:
  // Runs a client call; a NetworkError comes back prefixed with the hosts whose shard no longer
  // accepts connections (the hosts that are gone), when there are any.
  template <typename Call>
  void naming_lost_hosts(Call&& call);
  // "host 1 (h:p) is gone (Connection refused), ...; host 0 (h:p) left, saying bye" for the hosts
  // whose port refuses or is silent: first those that vanished, then those that said bye.
  std::string lost_hosts() const;
  // Exchanges the control chunk: this host fills its own block, the others' stay -0.0, so the
  // shards' sum hands every host every block unchanged.
  std::vector<float> exchange_control(std::span<const float> my_block);

  ClusterConfig config_;
  int64_t block_floats_ = 0;  // per host in the control chunk
  int64_t control_round_ = 0;
  std::vector<float> control_;
  std::unique_ptr<ShardServer> shard_;
  std::unique_ptr<PsClient> client_;
};

}  // namespace cgdp
