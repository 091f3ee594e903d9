// A TCP relay on loopback between hosts and one shard, for tests: it forwards bytes both ways,
// and a test can hold what hosts send and then cut the connections holding it, as a network that
// drops a connection mid-message does. Connections made after a cut are relayed again.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "cgdp/core/error.hpp"

namespace cgdp::testing {

// The port of a ZeroMQ endpoint "tcp://127.0.0.1:PORT".
inline int port_of(const std::string& endpoint) {
  return std::stoi(endpoint.substr(endpoint.rfind(':') + 1));
}

class TcpRelay {
 public:
  explicit TcpRelay(int target_port) : target_port_(target_port) {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a = loopback(0);
    socklen_t size = sizeof a;
    if (::bind(listener_, reinterpret_cast<sockaddr*>(&a), size) != 0 ||
        ::listen(listener_, 16) != 0 ||
        ::getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &size) != 0)
      throw std::runtime_error("relay: cannot listen on loopback");
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { run(); });
  }
  ~TcpRelay() {
    stop_ = true;
    thread_.join();
    for (const Pair& p : pairs_) close_pair(p);
    ::close(listener_);
  }
  std::string endpoint() const { return cat("tcp://127.0.0.1:", port_); }

  // From now on, bytes from hosts wait in their connections instead of going on.
  void hold() { hold_ = true; }
  // Resets every connection on which a host has sent more than `bytes` since hold() (what is held
  // is lost); once it cut one, relays again. Returns how many it cut.
  int cut_holding(int bytes) {
    std::lock_guard lock(mutex_);
    int cut = 0;
    std::erase_if(pairs_, [&](const Pair& p) {
      int waiting = 0;
      if (::ioctl(p.host, FIONREAD, &waiting) != 0 || waiting <= bytes) return false;
      close_pair(p);
      ++cut;
      return true;
    });
    if (cut) hold_ = false;
    return cut;
  }

 private:
  struct Pair {
    int host, shard;
  };
  static sockaddr_in loopback(int port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port));
    return a;
  }
  static void close_pair(const Pair& p) {
    // SO_LINGER 0: the peer sees a reset, as when a link drops, not an orderly close.
    const linger reset{1, 0};
    for (int fd : {p.host, p.shard}) {
      ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
      ::close(fd);
    }
  }
  void accept_one() {
    const int host = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    if (host < 0) return;
    const int shard = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const sockaddr_in a = loopback(target_port_);
    if (::connect(shard, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
      close_pair({host, shard});
      return;
    }
    pairs_.push_back({host, shard});
  }
  // Moves what `from` has to `to`; false once either end is closed.
  static bool forward(int from, int to) {
    char buffer[1 << 16];
    const ssize_t n = ::read(from, buffer, sizeof buffer);
    if (n <= 0) return false;
    for (ssize_t done = 0; done < n;) {
      const ssize_t w = ::write(to, buffer + done, n - done);
      if (w <= 0) return false;
      done += w;
    }
    return true;
  }
  void run() {
    while (!stop_) {
      std::unique_lock lock(mutex_);
      std::vector<pollfd> fds = {{listener_, POLLIN, 0}};
      for (const Pair& p : pairs_) {
        fds.push_back({p.host, static_cast<short>(hold_ ? 0 : POLLIN), 0});
        fds.push_back({p.shard, POLLIN, 0});
      }
      const std::vector<Pair> polled = pairs_;
      lock.unlock();
      if (::poll(fds.data(), fds.size(), 20) <= 0) continue;
      lock.lock();
      if (fds[0].revents & POLLIN) accept_one();
      for (size_t i = 0; i < polled.size(); ++i) {
        const Pair p = polled[i];
        const auto alive = std::find_if(pairs_.begin(), pairs_.end(),
                                        [&](const Pair& q) { return q.host == p.host; });
        if (alive == pairs_.end()) continue;  // cut meanwhile
        // hold_ again: it may have been set while poll() waited.
        const bool host_ok = hold_ || !(fds[1 + 2 * i].revents & (POLLIN | POLLHUP | POLLERR)) ||
                             forward(p.host, p.shard);
        const bool shard_ok =
            !(fds[2 + 2 * i].revents & (POLLIN | POLLHUP | POLLERR)) || forward(p.shard, p.host);
        if (!host_ok || !shard_ok) {
          close_pair(p);
          pairs_.erase(alive);
        }
      }
    }
  }

  int target_port_, port_ = 0, listener_ = -1;
  std::atomic<bool> stop_{false}, hold_{false};
  std::mutex mutex_;
  std::vector<Pair> pairs_;
  std::thread thread_;
};

}  // namespace cgdp::testing
