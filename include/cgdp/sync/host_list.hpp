// The hosts of a multi-host run as `--hosts` names them: one "host:port" per rank, the same list
// on every host; rank r runs its shard on entry r.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace cgdp {

struct HostPort {
  std::string host;  // a name or an IPv4 address, as given
  int port = 0;
  std::string text() const;  // "host:port"
};

// Parses "host:port" items; `default_port(rank)` is used for an item without ":port" (launch's
// --port-base), and where it is empty a port is required. Throws UsageError naming the item for
// an empty host, a port outside 1..65535 or an entry given twice.
std::vector<HostPort> parse_host_list(const std::vector<std::string>& items,
                                      const std::function<int(int rank)>& default_port = {});

// The IPv4 address `host` resolves to ("10.0.0.2"), for ZeroMQ, which binds only to addresses.
// Throws UsageError naming the host when it does not resolve.
std::string resolve_ipv4(const std::string& host);

// Tries a TCP connection to ip:port for at most `timeout`; returns "" when it is accepted, else
// why not ("connection refused", "no answer within 1 s", ...). To name a host that went away.
std::string probe_tcp(const std::string& ip, int port, std::chrono::milliseconds timeout);

// Throws UsageError when a loopback name (localhost, 127.x) sits beside a host that is not this
// machine: on every other host that name would mean that host itself.
void check_loopback_alone(const std::vector<HostPort>& hosts);

// Whether `host` is this machine: localhost, a loopback address, this host's name, or one of
// its interfaces' addresses (launch starts such ranks directly instead of over ssh).
bool is_local_host(const std::string& host);

}  // namespace cgdp
