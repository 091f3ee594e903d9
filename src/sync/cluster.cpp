// Cluster: this host's shard, its client of all shards, and the control chunk that carries the
// start agreement and the BatchNorm statistics through the same shards as the gradients.
#include "cgdp/sync/cluster.hpp"

#include <algorithm>
#include <bit>
#include <thread>

#include "cgdp/core/counter_rng.hpp"
#include "cgdp/core/error.hpp"

namespace cgdp {

namespace {

// Agreement values travel as two floats of 24 bits each: exact through a float sum.
constexpr int kMaxAgreement = 24;
constexpr int64_t kLow24 = (int64_t{1} << 24) - 1;

constexpr int64_t kLimit = int64_t{1} << 48;

// Values in [0, 2^48) as they are; others (negative flags, large seeds) mixed into that range.
int64_t fold48(int64_t v) {
  if (v >= 0 && v < kLimit) return v;
  uint64_t x = static_cast<uint64_t>(v) + 0x9e3779b97f4a7c15ull;  // SplitMix64's finaliser
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return static_cast<int64_t>((x ^ (x >> 31)) % static_cast<uint64_t>(kLimit));
}

// How host `h`'s value reads in a disagreement.
std::string shown(const Agreed& a, int64_t value) {
  switch (a.kind) {
    case Agreed::Kind::kFloat:
      return cat(std::bit_cast<float>(static_cast<uint32_t>(value)));
    case Agreed::Kind::kDigest:
      return cat("digest ", value);
    default:
      return cat(value);
  }
}

std::string zmq_address(const HostPort& h) {
  return cat("tcp://", resolve_ipv4(h.host), ":", h.port);
}

}  // namespace

Cluster::Cluster(ClusterConfig config) : config_(std::move(config)) {
  const int hosts = num_hosts();
  if (config_.rank < 0 || config_.rank >= hosts)
    throw UsageError(cat("--rank ", config_.rank, " is outside the ", hosts, " hosts of --hosts"));
  check_loopback_alone(config_.hosts);
  block_floats_ = std::max<int64_t>(2 * kMaxAgreement, config_.state_floats);
  std::vector<int64_t> chunks = config_.chunk_sizes;
  chunks.push_back(block_floats_ * hosts);  // the control chunk, last
  std::vector<int> owners = config_.chunk_owners;
  if (!owners.empty()) owners.push_back(kSummed);
  control_.assign(static_cast<size_t>(chunks.back()), -0.f);
  ShardConfig shard;
  shard.address = zmq_address(config_.hosts[config_.rank]);
  shard.shard = config_.rank;
  shard.num_shards = hosts;
  shard.num_hosts = hosts;
  shard.chunk_sizes = chunks;
  shard.chunk_owners = owners;
  shard.token = config_.token;
  shard.sum_threads = config_.sum_threads;
  shard.log = config_.log;
  shard_ = std::make_unique<ShardServer>(std::move(shard));
  PsClientConfig client;
  for (const HostPort& h : config_.hosts) client.shards.push_back(zmq_address(h));
  client.rank = config_.rank;
  client.num_hosts = hosts;
  client.chunk_sizes = std::move(chunks);
  client.chunk_owners = std::move(owners);
  client.token = config_.token;
  client.timeout = config_.timeout;
  client_ = std::make_unique<PsClient>(std::move(client));
}

Cluster::~Cluster() {
  client_.reset();
  shard_.reset();
}

std::string Cluster::host_name(int rank) const {
  return cat("host ", rank, " (", config_.hosts[rank].text(), ")");
}

// A host that said bye to our shard stopped on its own (often because another host went), so the
// hosts that vanished without one come first: they are the likely cause.
std::string Cluster::lost_hosts() const {
  const std::vector<int> said_bye = shard_->stats().hosts_said_bye;
  std::string vanished, left;
  for (int h = 0; h < num_hosts(); ++h) {
    if (h == rank()) continue;
    const HostPort& host = config_.hosts[h];
    const std::string why = probe_tcp(resolve_ipv4(host.host), host.port, std::chrono::seconds(1));
    if (why.empty()) continue;
    if (std::find(said_bye.begin(), said_bye.end(), h) == said_bye.end())
      vanished += cat(vanished.empty() ? "" : ", ", host_name(h), " is gone (", why, ")");
    else
      left += cat(left.empty() ? "" : ", ", host_name(h), " left, saying bye");
  }
  if (vanished.empty() || left.empty()) return vanished + left;
  return cat(vanished, "; ", left);
}

// A shard waiting for a dead host's push just stays silent, so the client's error may name a live
// shard; probing every host's port tells which host really went away. A process being killed
// drops its connections a moment before its listening socket, hence the second look.
template <typename Call>
void Cluster::naming_lost_hosts(Call&& call) {
  try {
    call();
  } catch (const NetworkError& e) {
    std::string gone = lost_hosts();
    if (gone.empty()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      gone = lost_hosts();
    }
    if (gone.empty()) throw;
    throw NetworkError(cat(gone, ": ", e.what()));
  }
}

void Cluster::push(int64_t iteration, int chunk, const float* sum, int64_t count) {
  naming_lost_hosts([&] { client_->push(iteration, chunk, sum, count); });
}

PulledChunk Cluster::pull(int64_t iteration, int chunk) {
  PulledChunk sum;
  naming_lost_hosts([&] { sum = client_->pull(iteration, chunk); });
  return sum;
}

std::vector<float> Cluster::exchange_control(std::span<const float> my_block) {
  CGDP_ASSERT(static_cast<int64_t>(my_block.size()) <= block_floats_);
  std::fill(control_.begin(), control_.end(), -0.f);  // x + -0.0 == x for every x, zeros included
  std::copy(my_block.begin(), my_block.end(), control_.begin() + config_.rank * block_floats_);
  const int chunk = static_cast<int>(config_.chunk_sizes.size());
  const int64_t count = static_cast<int64_t>(control_.size());
  // Its own clock: every host makes the same sequence of control exchanges.
  const int64_t round = control_round_++;
  push(round, chunk, control_.data(), count);
  pull(round, chunk).copy_to(control_.data());
  return control_;
}

Agreed Agreed::real(std::string name, float value) {
  Agreed a(std::move(name), std::bit_cast<uint32_t>(value));  // 32 bits travel exactly
  a.kind = Kind::kFloat;
  return a;
}

Agreed Agreed::digest(std::string name, std::string_view text) {
  Agreed a(std::move(name), fold48(static_cast<int64_t>(hash_name(text))));
  a.kind = Kind::kDigest;
  return a;
}

void Cluster::agree(const Agreement& mine) {
  CGDP_ASSERT(static_cast<int>(mine.size()) <= kMaxAgreement);
  std::vector<float> block;
  for (const Agreed& a : mine) {
    const int64_t v = fold48(a.value);
    block.push_back(static_cast<float>(v >> 24));
    block.push_back(static_cast<float>(v & kLow24));
  }
  const std::vector<float> all = exchange_control(block);
  auto value_of = [&](int host, size_t field) {
    const float* b = all.data() + host * block_floats_ + 2 * field;
    return (static_cast<int64_t>(b[0]) << 24) | static_cast<int64_t>(b[1]);
  };
  for (int h = 1; h < num_hosts(); ++h)
    for (size_t i = 0; i < mine.size(); ++i)
      if (value_of(h, i) != value_of(0, i)) {
        finish();  // every host sees the same values and stops alike, once all have them
        throw UsageError(
            cat("hosts disagree on the ", mine[i].name, ": ", host_name(h), " has ",
                shown(mine[i], value_of(h, i)), ", ", host_name(0), " has ",
                shown(mine[i], value_of(0, i)),
                " (give every host the same flags, data and model, and the same --resume "
                "checkpoint)"));
      }
}

std::vector<float> Cluster::gather_state(std::span<const float> mine) {
  CGDP_ASSERT(static_cast<int64_t>(mine.size()) == config_.state_floats);
  const std::vector<float> all = exchange_control(mine);
  std::vector<float> out;
  out.reserve(static_cast<size_t>(config_.state_floats * num_hosts()));
  for (int h = 0; h < num_hosts(); ++h) {
    const auto* block = all.data() + h * block_floats_;
    out.insert(out.end(), block, block + config_.state_floats);
  }
  return out;
}

void Cluster::finish() {
  client_.reset();  // bye to every shard
  if (!shard_->wait(config_.timeout))
    config_.log(cat("not every host said bye within ", config_.timeout.count() / 1000.0,
                    " s; stopping this host's shard anyway"));
  shard_.reset();
}

}  // namespace cgdp
