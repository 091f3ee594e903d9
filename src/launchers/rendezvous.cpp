// The rendezvous: a ROUTER socket on rank 0 gathers the reports, a DEALER on each rank sends its
// own and waits for the list. Messages are text with an HMAC under the cluster token at the end.
#include "cgdp/launchers/rendezvous.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <map>
#include <sstream>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "cgdp/core/error.hpp"
#include "cgdp/shard/handshake_proof.hpp"
#include "cgdp/shard/zmtp3_only.hpp"

namespace cgdp {

namespace {

using Clock = std::chrono::steady_clock;

std::string signed_text(const std::string& token, const std::string& text) {
  return text + " " + token_hmac(token, text);
}

// The text of a signed message, or "" when its HMAC is not the token's.
std::string verified_text(const std::string& token, const std::string& message) {
  const size_t space = message.rfind(' ');
  if (space == std::string::npos) return "";
  const std::string text = message.substr(0, space);
  return token_hmac(token, text) == message.substr(space + 1) ? text : "";
}

struct Report {
  int rank = -1, size = 0;
  std::string address;  // ip:port
};

Report parse_report(const std::string& text) {
  std::istringstream in(text);
  std::string tag, ip;
  int version = 0, port = 0;
  Report r;
  if (!(in >> tag >> version >> r.rank >> r.size >> ip >> port) || tag != "cgdp-rendezvous" || version != 1)
    throw UsageError(cat("rendezvous: a report that is not cgdp's: '", text, "'"));
  r.address = cat(ip, ":", port);
  return r;
}

std::vector<std::string> gather(const RendezvousConfig& c, const std::string& own) {
  zmq::context_t context{1};
  zmq::socket_t router(context, zmq::socket_type::router);
  router.set(zmq::sockopt::linger, static_cast<int>(c.timeout.count()));
  accept_zmtp3_peers_only(router);
  try {
    router.bind(cat("tcp://*:", c.master.port));
  } catch (const zmq::error_t& e) {
    throw UsageError(cat("--master ", c.master.text(), ": rank 0 cannot listen on port ", c.master.port,
                         ": ", e.what(), " (give a free port)"));
  }
  std::vector<std::string> addresses(static_cast<size_t>(c.size));
  std::map<int, std::string> identities;
  addresses[0] = own;
  int heard = 1;
  const Clock::time_point deadline = Clock::now() + c.timeout;
  while (heard < c.size) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    std::vector<zmq::pollitem_t> items{{router.handle(), 0, ZMQ_POLLIN, 0}};
    if (left.count() <= 0 || zmq::poll(items, left) == 0) {
      std::string missing;
      for (int r = 1; r < c.size; ++r)
        if (addresses[r].empty()) missing += cat(missing.empty() ? "" : ", ", r);
      throw RuntimeCheckError(cat("rendezvous at ", c.master.text(), ": no word from rank", 
                                  heard + 1 < c.size ? "s " : " ", missing, " of ", c.size, " within ",
                                  c.timeout.count() / 1000.0, " s (did the launcher start them, with the same --master?)"));
    }
    std::vector<zmq::message_t> parts;
    if (!zmq::recv_multipart(router, std::back_inserter(parts)) || parts.size() != 2) continue;
    const std::string text = verified_text(c.token, parts[1].to_string());
    if (text.empty())
      throw UsageError(cat("rendezvous at ", c.master.text(), ": a rank's report is signed with another "
                           "cluster token (is it the same file or CGDP_CLUSTER_TOKEN on every rank?)"));
    const Report r = parse_report(text);
    if (r.size != c.size || r.rank < 1 || r.rank >= c.size)
      throw UsageError(cat("rendezvous: rank ", r.rank, " of ", r.size, " reported to a job of ", c.size, " ranks"));
    if (!addresses[r.rank].empty())
      throw UsageError(cat("rendezvous: two processes claim rank ", r.rank, " (", addresses[r.rank], " and ", r.address, ")"));
    addresses[r.rank] = r.address;
    identities[r.rank] = parts[0].to_string();
    ++heard;
  }
  std::string list;
  for (const std::string& a : addresses) list += cat(list.empty() ? "" : ",", a);
  const std::string reply = signed_text(c.token, cat("cgdp-hosts 1 ", c.size, " ", list));
  for (const auto& [rank, identity] : identities) {
    router.send(zmq::buffer(identity), zmq::send_flags::sndmore);
    router.send(zmq::buffer(reply), zmq::send_flags::none);
  }
  return addresses;  // closing the context waits (up to the linger) until the replies are out
}

std::vector<std::string> ask(const RendezvousConfig& c, const std::string& ip, const std::string& own,
                             int port) {
  zmq::context_t context{1};
  zmq::socket_t dealer(context, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::linger, 0);
  dealer.connect(cat("tcp://", resolve_ipv4(c.master.host), ":", c.master.port));
  dealer.send(zmq::buffer(signed_text(
                  c.token, cat("cgdp-rendezvous 1 ", c.rank, " ", c.size, " ", ip, " ", port))),
              zmq::send_flags::none);
  std::vector<zmq::pollitem_t> items{{dealer.handle(), 0, ZMQ_POLLIN, 0}};
  if (zmq::poll(items, c.timeout) == 0)
    throw RuntimeCheckError(cat("rendezvous: no list from rank 0 at ", c.master.text(), " within ",
                                c.timeout.count() / 1000.0, " s (is rank 0 up, and --master the same on every rank?)"));
  zmq::message_t message;
  (void)dealer.recv(message, zmq::recv_flags::none);
  const std::string text = verified_text(c.token, message.to_string());
  if (text.empty())
    throw UsageError(cat("rendezvous: rank 0 at ", c.master.text(), " signs with another cluster token"));
  std::istringstream in(text);
  std::string tag, list;
  int version = 0, size = 0;
  if (!(in >> tag >> version >> size >> list) || tag != "cgdp-hosts" || version != 1 || size != c.size)
    throw UsageError(cat("rendezvous: rank 0 answered '", text, "'"));
  std::vector<std::string> addresses;
  std::istringstream items_in(list);
  for (std::string a; std::getline(items_in, a, ',');) addresses.push_back(a);
  if (static_cast<int>(addresses.size()) != c.size || addresses[c.rank] != own)
    throw UsageError(cat("rendezvous: rank 0's list does not hold this rank's ", own, ": ", list));
  return addresses;
}

}  // namespace

std::string local_address_towards(const std::string& ip, int port) {
  const int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  if (fd < 0) throw IoError("rendezvous: cannot open a socket to find this host's address");
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, ip.c_str(), &to.sin_addr);
  sockaddr_in from{};
  socklen_t length = sizeof from;
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&from), &length) == 0;
  ::close(fd);
  if (!ok) throw IoError(cat("rendezvous: no route from this host to ", ip, ":", port));
  char text[INET_ADDRSTRLEN] = "";
  ::inet_ntop(AF_INET, &from.sin_addr, text, sizeof text);
  return text;
}

std::vector<std::string> rendezvous(const RendezvousConfig& c) {
  if (c.size < 1 || c.rank < 0 || c.rank >= c.size)
    throw UsageError(cat("rendezvous: rank ", c.rank, " of ", c.size));
  const std::string master_ip = resolve_ipv4(c.master.host);
  const std::string ip = local_address_towards(master_ip, c.master.port);
  const std::string own = cat(ip, ":", c.shard_port);
  if (c.log) c.log(cat("rank ", c.rank, " of ", c.size, ": shard at ", own, ", rendezvous at ", c.master.text()));
  return c.rank == 0 ? gather(c, own) : ask(c, ip, own, c.shard_port);
}

}  // namespace cgdp
