// Watches one ZeroMQ socket's connection events (handshake refused, disconnected) through the
// library's socket monitor, so hosts and shards can name a peer that refused them or went away.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <zmq.hpp>

namespace cgdp {

struct SocketEvent {
  uint16_t event = 0;  // ZMQ_EVENT_*
  uint32_t value = 0;  // event-specific: an errno, a ZMTP status code or a file descriptor
  std::string endpoint;
};

class SocketMonitor {
 public:
  // Starts monitoring `socket` for `events` (a ZMQ_EVENT_* mask); call before connect or bind so
  // no event is missed. The monitor must be destroyed before `socket` is closed.
  SocketMonitor(zmq::context_t& context, zmq::socket_t& socket, int events);
  ~SocketMonitor();
  SocketMonitor(const SocketMonitor&) = delete;
  SocketMonitor& operator=(const SocketMonitor&) = delete;

  // The PAIR socket the events arrive on, for zmq::poll.
  zmq::socket_t& socket() { return pair_; }
  // The next event if one is waiting; never blocks.
  std::optional<SocketEvent> next();

 private:
  zmq::socket_t& watched_;
  zmq::socket_t pair_;
};

// "handshake refused (authentication)", "disconnected", ... for log lines and errors.
std::string event_name(uint16_t event);

}  // namespace cgdp
