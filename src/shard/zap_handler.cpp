// ZAP handler: checks the PLAIN password as the proof of the rank the user name claims.
#include "shard/zap_handler.hpp"

#include <iterator>
#include <optional>
#include <vector>
#include <zmq_addon.hpp>

#include "cgdp/core/error.hpp"
#include "cgdp/shard/rank_proof.hpp"

namespace cgdp {

ZapHandler::ZapHandler(zmq::context_t& context, std::string token, const ShardLog& log)
    : socket_(context, zmq::socket_type::rep), token_(std::move(token)), log_(log) {
  socket_.set(zmq::sockopt::linger, 0);
  socket_.bind("inproc://zeromq.zap.01");
}

bool ZapHandler::handle_one() {
  // Request: version, request id, domain, address, routing id, mechanism, credentials...
  std::vector<zmq::message_t> request;
  if (!zmq::recv_multipart(socket_, std::back_inserter(request), zmq::recv_flags::dontwait))
    return true;
  auto text = [&](size_t i) { return i < request.size() ? request[i].to_string() : std::string(); };
  const std::string address = text(3), mechanism = text(5), user = text(6);
  bool ok = false;
  std::optional<int> rank;
  std::string why;
  if (request.size() < 6 || text(0) != "1.0") {
    why = "malformed authentication request";
  } else if (mechanism != "PLAIN" || request.size() != 8) {
    why = cat("mechanism ", mechanism, "; expected PLAIN with a proof of rank");
  } else {
    rank = proven_rank(token_, user, text(7));
    ok = rank.has_value();
    if (!ok) why = "no valid proof of rank under this cluster's token (a different token?)";
  }
  if (!ok)
    log_(cat("refused a connection from ", address.empty() ? "?" : address, " (user '", user,
             "'): ", why));
  // Reply: version, request id, status code, status text, user id, metadata.
  std::vector<zmq::message_t> reply;
  reply.emplace_back(std::string("1.0"));
  reply.emplace_back(request.size() > 1 ? request[1].to_string() : std::string());
  reply.emplace_back(std::string(ok ? "200" : "400"));
  reply.emplace_back(ok ? std::string("OK") : why);
  reply.emplace_back(ok ? std::to_string(*rank) : std::string());  // the messages' User-Id
  reply.emplace_back();
  zmq::send_multipart(socket_, reply);
  return ok;
}

}  // namespace cgdp
