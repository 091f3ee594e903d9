// Listening sockets that speak with ZMTP 3 peers only. libzmq 4.3.4 (Debian 12's) now and then
// aborts the whole process on a ZMTP 1.0 peer ("Resource temporarily unavailable
// (src/zmtp_engine.cpp:446)": an errno_assert on passing the peer's routing id on, where the ZMTP 3
// path checks for EAGAIN), and random bytes from a stranger can open such a connection. With a ZAP
// domain set, libzmq refuses ZMTP 1.0 and 2.0 peers at the handshake; with no ZAP handler in the
// context (cgdp runs none) and ZMQ_ZAP_ENFORCE_DOMAIN off, ZMTP 3 peers, every cgdp process among
// them, are let in as before.
#pragma once

#include <zmq.hpp>

namespace cgdp {

inline void accept_zmtp3_peers_only(zmq::socket_t& listening) {
  listening.set(zmq::sockopt::zap_domain, "cgdp");
}

}  // namespace cgdp
