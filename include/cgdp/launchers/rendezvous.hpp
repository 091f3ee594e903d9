// How ranks started by MPI learn each other's shard addresses: rank 0 listens at the master
// address, every rank reports "rank, address, port" signed with the cluster token, and once all
// have, rank 0 hands the whole list, signed, back to each. ZeroMQ, as the shards.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "cgdp/sync/host_list.hpp"

namespace cgdp {

struct RendezvousConfig {
  HostPort master;  // where rank 0 listens (every rank gives the same)
  int rank = 0, size = 1;
  int shard_port = 0;  // where this rank's shard will listen
  std::string token;
  std::chrono::milliseconds timeout{60000};
  std::function<void(const std::string&)> log;  // progress lines; may be empty
};

// Every rank's shard "ip:port", by rank. This rank's ip is the one its traffic to the master leaves
// from. Throws UsageError for a report signed with another token or two claims to one rank, and
// RuntimeCheckError naming the ranks not heard from (rank 0) or the master (the others) within
// the timeout.
std::vector<std::string> rendezvous(const RendezvousConfig& config);

// The local IPv4 address that packets to `ip:port` leave from (no packet is sent).
std::string local_address_towards(const std::string& ip, int port);

}  // namespace cgdp
