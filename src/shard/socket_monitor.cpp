// Socket monitor: ZeroMQ's event stream for one socket, read without blocking.
#include "shard/socket_monitor.hpp"

#include <atomic>
#include <cstring>

#include "cgdp/core/error.hpp"

namespace cgdp {

SocketMonitor::SocketMonitor(zmq::context_t& context, zmq::socket_t& socket, int events)
    : watched_(socket), pair_(context, zmq::socket_type::pair) {
  static std::atomic<uint64_t> serial{0};
  const std::string address = cat("inproc://cgdp-monitor-", serial++);
  if (zmq_socket_monitor(socket.handle(), address.c_str(), events) != 0) throw zmq::error_t();
  pair_.set(zmq::sockopt::linger, 0);
  // ZeroMQ's I/O thread blocks once 2,000 events lie unread (strangers at a busy or stopping
  // shard), freezing its connections; no receive limit here leaves the inproc pipe without one.
  pair_.set(zmq::sockopt::rcvhwm, 0);
  pair_.connect(address);
}

SocketMonitor::~SocketMonitor() {
  zmq_socket_monitor(watched_.handle(), nullptr, 0);
}

std::optional<SocketEvent> SocketMonitor::next() {
  // An event is two frames: 6 bytes (uint16 event, uint32 value), then the endpoint.
  zmq::message_t head, endpoint;
  if (!pair_.recv(head, zmq::recv_flags::dontwait)) return std::nullopt;
  if (head.more()) (void)pair_.recv(endpoint);
  SocketEvent event;
  if (head.size() >= 6) {
    std::memcpy(&event.event, head.data(), 2);
    std::memcpy(&event.value, head.data<char>() + 2, 4);
  }
  event.endpoint = endpoint.to_string();
  return event;
}

std::string event_name(uint16_t event) {
  switch (event) {
    case ZMQ_EVENT_CONNECTED:
      return "connected";
    case ZMQ_EVENT_ACCEPTED:
      return "accepted";
    case ZMQ_EVENT_DISCONNECTED:
      return "disconnected";
    case ZMQ_EVENT_HANDSHAKE_SUCCEEDED:
      return "handshake succeeded";
    case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH:
      return "handshake refused (authentication)";
    case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL:
      return "handshake failed (protocol error)";
    case ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL:
      return "handshake failed";
  }
  return cat("event 0x", std::hex, event);
}

}  // namespace cgdp
