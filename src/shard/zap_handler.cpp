// ZAP handler: checks the PLAIN password against the cluster token in constant time.
#include "shard/zap_handler.hpp"

#include <iterator>
#include <vector>
#include <zmq_addon.hpp>

#include "cgdp/core/error.hpp"

namespace cgdp {
namespace {

// Compares without an early exit, so the reply time tells nothing about the token's bytes.
bool same_secret(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) diff |= a[i] ^ b[i % (b.empty() ? 1 : b.size())];
  return diff == 0 && !b.empty();
}

}  // namespace

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
  std::string why;
  if (request.size() < 6 || text(0) != "1.0") {
    why = "malformed authentication request";
  } else if (mechanism != "PLAIN" || request.size() != 8) {
    why = cat("mechanism ", mechanism, "; expected PLAIN with the cluster token");
  } else {
    ok = same_secret(text(7), token_);
    if (!ok) why = "wrong cluster token";
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
  reply.emplace_back(ok ? user : std::string());
  reply.emplace_back();
  zmq::send_multipart(socket_, reply);
  return ok;
}

}  // namespace cgdp
