// Host lists: parsing "host:port", resolving names for ZeroMQ, recognising this machine.
#include "cgdp/sync/host_list.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <set>

#include "cgdp/core/error.hpp"

namespace cgdp {

std::string HostPort::text() const {
  return cat(host, ":", port);
}

std::vector<HostPort> parse_host_list(const std::vector<std::string>& items,
                                      const std::function<int(int)>& default_port) {
  if (items.empty()) throw UsageError("--hosts: no hosts given (expected host:port,host:port,...)");
  std::vector<HostPort> hosts;
  std::set<std::string> seen;
  for (const std::string& item : items) {
    const int rank = static_cast<int>(hosts.size());
    const size_t colon = item.rfind(':');
    HostPort h{item.substr(0, colon), 0};
    if (colon == std::string::npos) {
      if (!default_port)
        throw UsageError(cat("--hosts: '", item, "' has no port (expected host:port)"));
      h.port = default_port(rank);
    } else {
      const char* first = item.data() + colon + 1;
      const char* last = item.data() + item.size();
      const auto [end, ec] = std::from_chars(first, last, h.port);
      if (ec != std::errc() || end != last || first == last) h.port = -1;
    }
    if (h.host.empty()) throw UsageError(cat("--hosts: '", item, "' has no host name"));
    if (h.port < 1 || h.port > 65535)
      throw UsageError(cat("--hosts: '", item, "' needs a port in 1..65535 (for rank ", rank, ")"));
    if (!seen.insert(h.text()).second)
      throw UsageError(
          cat("--hosts: ", h.text(), " is given twice (each rank needs its own host:port)"));
    hosts.push_back(std::move(h));
  }
  return hosts;
}

std::string resolve_ipv4(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &found); rc != 0)
    throw UsageError(cat("--hosts: host '", host, "' does not resolve to an IPv4 address (",
                         ::gai_strerror(rc), ")"));
  char text[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(found->ai_addr)->sin_addr, text,
              sizeof text);
  ::freeaddrinfo(found);
  return text;
}

std::string probe_tcp(const std::string& ip, int port, std::chrono::milliseconds timeout) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  if (::inet_pton(AF_INET, ip.c_str(), &address.sin_addr) != 1)
    return cat("'", ip, "' is no IPv4 address");
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::strerror(errno);
  std::string why;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    if (errno != EINPROGRESS) {
      why = std::strerror(errno);
    } else {
      pollfd p{fd, POLLOUT, 0};
      int error = 0;
      socklen_t size = sizeof error;
      if (::poll(&p, 1, static_cast<int>(timeout.count())) != 1)
        why = cat("no answer within ", timeout.count(), " ms");
      else if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size) == 0 && error != 0)
        why = std::strerror(error);
    }
  }
  ::close(fd);
  return why;
}

bool is_local_host(const std::string& host) {
  if (host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1") return true;
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) == 0) {
    const std::string self = name;
    if (host == self || host == self.substr(0, self.find('.'))) return true;
  }
  ifaddrs* interfaces = nullptr;
  if (::getifaddrs(&interfaces) != 0) return false;
  bool local = false;
  for (ifaddrs* i = interfaces; i && !local; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
    char text[INET_ADDRSTRLEN] = {};
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, text, sizeof text);
    local = host == text;
  }
  ::freeifaddrs(interfaces);
  return local;
}

void check_loopback_alone(const std::vector<HostPort>& hosts) {
  auto loopback = [](const HostPort& h) {
    return h.host == "localhost" || h.host.rfind("127.", 0) == 0;
  };
  const auto lo = std::find_if(hosts.begin(), hosts.end(), loopback);
  if (lo == hosts.end()) return;
  for (const HostPort& h : hosts)
    if (!is_local_host(h.host))
      throw UsageError(cat("--hosts: '", lo->host, "' would mean another machine on ", h.host,
                           "; name this machine by an address the other hosts reach"));
}

}  // namespace cgdp
