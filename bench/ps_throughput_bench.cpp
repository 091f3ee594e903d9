// Parameter-server push+pull throughput on loopback for 1-4 shards and chunks of 64 KiB..64 MiB,
// next to a plain TCP echo (POSIX sockets, the same bytes each way) measured in the same run.
// bench/ps_throughput_table.sh prints their ratio.
#include <arpa/inet.h>
#include <benchmark/benchmark.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include "cgdp/shard/ps_client.hpp"
#include "cgdp/shard/shard_server.hpp"

namespace {

const std::string kToken = "benchmark-cluster-token-0123456789";

// Args: shards S, bytes B. One host pushes one B-byte chunk (split over the S shards) and pulls
// the sum back, in place; with one host a shard's sum is the push itself, so this measures the
// transport. Bytes counted: B up and B down.
void BM_PsPushPull(benchmark::State& state) {
  const int shards = static_cast<int>(state.range(0));
  const int64_t bytes = state.range(1);
  const std::vector<int64_t> chunks = {bytes / static_cast<int64_t>(sizeof(float))};
  std::vector<std::unique_ptr<cgdp::ShardServer>> servers;
  std::vector<std::string> endpoints;
  for (int s = 0; s < shards; ++s) {
    cgdp::ShardConfig c;
    c.shard = s;
    c.num_shards = shards;
    c.chunk_sizes = chunks;
    c.token = kToken;
    c.log = [](const std::string&) {};
    servers.push_back(std::make_unique<cgdp::ShardServer>(c));
    endpoints.push_back(servers.back()->endpoint());
  }
  cgdp::PsClient client({endpoints, 0, 1, chunks, kToken, std::chrono::seconds(30)});
  std::vector<float> grads(chunks[0], 1.f);
  int64_t iteration = 0;
  for (auto _ : state) {
    client.push(iteration, 0, grads.data(), chunks[0]);
    client.pull(iteration, 0, grads.data(), chunks[0]);
    ++iteration;
  }
  state.SetBytesProcessed(state.iterations() * 2 * bytes);
}

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

// Arg: bytes B. The client sends B bytes on one TCP connection, the server reads them into its
// buffer and sends them back. Bytes counted: B up and B down, as above.
void BM_TcpEcho(benchmark::State& state) {
  const int64_t bytes = state.range(0);
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  check(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0, "bind");
  check(::listen(listener, 1) == 0, "listen");
  check(::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) == 0, "getsockname");
  std::thread server([&] {
    const int fd = ::accept(listener, nullptr, nullptr);
    std::vector<char> buffer(bytes);
    for (;;) {
      int64_t got = 0;
      for (ssize_t k; got < bytes && (k = ::recv(fd, buffer.data() + got, bytes - got, 0)) > 0;)
        got += k;
      if (got < bytes) break;  // the client closed
      send_all(fd, buffer.data(), bytes);
    }
    ::close(fd);
  });
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  check(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0, "connect");
  std::vector<char> data(bytes, 1);
  for (auto _ : state) {
    send_all(fd, data.data(), bytes);
    recv_all(fd, data.data(), bytes);
  }
  ::close(fd);
  server.join();
  ::close(listener);
  state.SetBytesProcessed(state.iterations() * 2 * bytes);
}

void sizes(benchmark::internal::Benchmark* b, bool with_shards) {
  for (int64_t bytes = 64 << 10; bytes <= 64 << 20; bytes *= 4) {
    if (!with_shards) b->Args({bytes});
    for (int s = 1; with_shards && s <= 4; ++s) b->Args({s, bytes});
  }
}

}  // namespace

// Wall time gives the throughput; the whole process's CPU time (every thread: ZeroMQ's I/O
// threads, the shards', the TCP server's) gives bytes per CPU-second, which a loaded machine
// disturbs less.
BENCHMARK(BM_TcpEcho)->Apply([](auto* b) {
                       sizes(b, false);
                     }) -> ArgNames({"bytes"}) -> UseRealTime() -> MeasureProcessCPUTime();
BENCHMARK(BM_PsPushPull)
    ->Apply([](auto* b) { sizes(b, true); }) -> ArgNames({"shards", "bytes"}) -> UseRealTime()
        -> MeasureProcessCPUTime();
BENCHMARK_MAIN();
