// Parameter-server push+pull throughput on loopback for 1-4 shards and chunks of 64 KiB..64 MiB,
// next to a plain TCP echo (POSIX sockets, the same bytes each way) between the same process's
// threads. Every benchmark iteration times one echo and two push+pulls back to back (the pulled
// sum left in ZeroMQ's buffers, as the aggregator reads it on CPU devices, and copied into the
// pushed buffer, as it is staged for CUDA devices), so that each ratio is taken at one moment of a
// shared machine whose speed swings within seconds; the counters are medians over the
// iterations. bench/ps_throughput_table.sh prints them.
#include <arpa/inet.h>
#include <benchmark/benchmark.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include "cgdp/shard/ps_client.hpp"
#include "cgdp/shard/shard_server.hpp"
#include "paired_timing.hpp"

namespace {

using cgdp::bench::median;
using cgdp::bench::seconds;

const std::string kToken = "benchmark-cluster-token-0123456789";

void check(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(what);
}

void send_all(int fd, const char* p, int64_t n) {
  while (n > 0) {
    const ssize_t k = ::send(fd, p, n, 0);
    check(k > 0, "send");
    p += k;
    n -= k;
  }
}

void recv_all(int fd, char* p, int64_t n) {
  while (n > 0) {
    const ssize_t k = ::recv(fd, p, n, 0);
    check(k > 0, "recv");
    p += k;
    n -= k;
  }
}

// A plain TCP echo on loopback: the client sends B bytes on one connection, a server thread reads
// them into its buffer and sends them back.
class TcpEcho {
 public:
  explicit TcpEcho(int64_t bytes) : bytes_(bytes), data_(bytes, 1) {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    check(::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0, "bind");
    check(::listen(listener_, 1) == 0, "listen");
    check(::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len) == 0, "getsockname");
    server_ = std::thread([this] { serve(); });
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    const int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    check(::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0, "connect");
  }
  ~TcpEcho() {
    ::close(fd_);
    server_.join();
    ::close(listener_);
  }
  void round_trip() {
    send_all(fd_, data_.data(), bytes_);
    recv_all(fd_, data_.data(), bytes_);
  }

 private:
  void serve() {
    const int fd = ::accept(listener_, nullptr, nullptr);
    std::vector<char> buffer(bytes_);
    for (;;) {
      int64_t got = 0;
      for (ssize_t k; got < bytes_ && (k = ::recv(fd, buffer.data() + got, bytes_ - got, 0)) > 0;)
        got += k;
      if (got < bytes_) break;  // the client closed
      send_all(fd, buffer.data(), bytes_);
    }
    ::close(fd);
  }
  int64_t bytes_;
  std::vector<char> data_;
  int listener_ = -1, fd_ = -1;
  std::thread server_;
};

// S shards and one host's client. The host pushes one B-byte chunk (split over the S shards) and
// pulls the sum back, in place; with one host a shard's sum is the push itself, so this measures
// the transport.
class PsRig {
 public:
  PsRig(int shards, int64_t bytes) : chunks_{bytes / static_cast<int64_t>(sizeof(float))} {
    std::vector<std::string> endpoints;
    for (int s = 0; s < shards; ++s) {
      cgdp::ShardConfig c;
      c.shard = s;
      c.num_shards = shards;
      c.chunk_sizes = chunks_;
      c.token = kToken;
      c.log = [](const std::string&) {};
      servers_.push_back(std::make_unique<cgdp::ShardServer>(c));
      endpoints.push_back(servers_.back()->endpoint());
    }
    client_ = std::make_unique<cgdp::PsClient>(
        cgdp::PsClientConfig{endpoints, 0, 1, chunks_, kToken, std::chrono::seconds(30)});
    grads_.assign(chunks_[0], 1.f);
  }
  // The sum as received: what the aggregator's H2D copies read on CPU devices.
  void push_pull() {
    client_->push(iteration_, 0, grads_.data(), chunks_[0]);
    const cgdp::PulledChunk sum = client_->pull(iteration_, 0);
    benchmark::DoNotOptimize(sum.pieces().back().data[sum.pieces().back().count - 1]);
    ++iteration_;
  }
  // The sum copied into the pushed buffer: what the aggregator stages for CUDA devices.
  void push_pull_copy() {
    client_->push(iteration_, 0, grads_.data(), chunks_[0]);
    client_->pull(iteration_, 0, grads_.data(), chunks_[0]);
    ++iteration_;
  }

 private:
  std::vector<int64_t> chunks_;
  std::vector<std::unique_ptr<cgdp::ShardServer>> servers_;
  std::unique_ptr<cgdp::PsClient> client_;
  std::vector<float> grads_;
  int64_t iteration_ = 0;
};

// Args: shards S, bytes B. Bytes counted: B up and B down, for all. Counters: each one's GB/s
// (median over iterations); `ratio`, the median of the parameter server's rate over the echo's in
// the same iteration (the figure to judge), and `copy_ratio`, the same with the sum copied out.
void BM_PsVsTcp(benchmark::State& state) {
  const int shards = static_cast<int>(state.range(0));
  const int64_t bytes = state.range(1);
  TcpEcho tcp(bytes);
  PsRig ps(shards, bytes);
  std::vector<double> tcp_s, ps_s, copy_s, ratios, copy_ratios;
  for (auto _ : state) {
    tcp_s.push_back(seconds([&] { tcp.round_trip(); }));
    ps_s.push_back(seconds([&] { ps.push_pull(); }));
    copy_s.push_back(seconds([&] { ps.push_pull_copy(); }));
    ratios.push_back(tcp_s.back() / ps_s.back());
    copy_ratios.push_back(tcp_s.back() / copy_s.back());
  }
  state.counters["tcp_GB/s"] = 2e-9 * bytes / median(tcp_s);
  state.counters["ps_GB/s"] = 2e-9 * bytes / median(ps_s);
  state.counters["ratio"] = median(ratios);
  state.counters["copy_ratio"] = median(copy_ratios);
}

void sizes(benchmark::internal::Benchmark* b) {
  for (int64_t bytes = 64 << 10; bytes <= 64 << 20; bytes *= 4)
    for (int s = 1; s <= 4; ++s) b->Args({s, bytes});
}

}  // namespace

BENCHMARK(BM_PsVsTcp)->Apply(sizes)->ArgNames({"shards", "bytes"})->UseRealTime()->MinTime(0.5);
BENCHMARK_MAIN();
