// The shard's ZeroMQ authentication (ZAP, RFC 27) handler: accepts a connection only when its
// PLAIN handshake proves a rank under the cluster token (rank_proof.hpp), and tags its messages
// with that rank as their User-Id; refused peers never reach the message loop.
#pragma once

#include <string>
#include <zmq.hpp>

#include "cgdp/shard/shard_server.hpp"

namespace cgdp {

class ZapHandler {
 public:
  // Binds the context's ZAP endpoint; must exist before any PLAIN server socket binds.
  ZapHandler(zmq::context_t& context, std::string token, const ShardLog& log);

  zmq::socket_t& socket() { return socket_; }
  // Answers one waiting request (never blocks when the socket polled readable). Returns false
  // when it refused the peer (logged with the peer's address and the user name it gave).
  bool handle_one();

 private:
  zmq::socket_t socket_;
  std::string token_;
  const ShardLog& log_;
};

}  // namespace cgdp
