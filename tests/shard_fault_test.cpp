// Shards under bad peers: wrong tokens, mismatched hellos, out-of-step and fuzzed frames, garbage
// bytes, oversized frames; and a shard that dies or freezes in another process.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <random>
#include <thread>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "cgdp/core/error.hpp"
#include "cgdp/shard/protocol.hpp"
#include "cgdp/shard/ps_client.hpp"
#include "cgdp/shard/rank_proof.hpp"
#include "cgdp/shard/shard_server.hpp"
#include "shard/zap_handler.hpp"
#include "support/shard_cluster.hpp"

namespace cgdp {
namespace {

using std::chrono::milliseconds;
using testing::Cluster;
using testing::expect_fixed_order_sum;
using testing::kToken;

// Runs `f`, which must throw NetworkError; returns its message.
template <typename F>
std::string network_error(F f) {
  try {
    f();
  } catch (const NetworkError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no NetworkError";
  return "";
}

// A raw connection to a shard, proven as host `rank` (or with the given credentials), for sending
// what PsClient never would.
struct RawPeer {
  explicit RawPeer(const std::string& endpoint, int rank = 0)
      : RawPeer(endpoint, rank_user(rank), rank_proof(kToken, rank)) {}
  RawPeer(const std::string& endpoint, const std::string& user, const std::string& password)
      : socket(context, zmq::socket_type::dealer) {
    socket.set(zmq::sockopt::plain_username, user);
    socket.set(zmq::sockopt::plain_password, password);
    socket.set(zmq::sockopt::linger, 0);
    socket.connect(endpoint);
  }
  void send(std::vector<std::string> frames, zmq::send_flags flags = zmq::send_flags::none) {
    std::vector<zmq::message_t> messages;
    for (auto& f : frames) messages.emplace_back(f.data(), f.size());
    zmq::send_multipart(socket, messages, flags);
  }
  // The next reply (header and text), or nothing within `timeout`.
  std::pair<MessageHeader, std::string> receive(milliseconds timeout = milliseconds(5000)) {
    socket.set(zmq::sockopt::rcvtimeo, static_cast<int>(timeout.count()));
    std::vector<zmq::message_t> frames;
    if (!zmq::recv_multipart(socket, std::back_inserter(frames))) return {};
    MessageHeader h;
    std::memcpy(&h, frames[0].data(), std::min(frames[0].size(), sizeof h));
    return {h, frames.size() > 1 ? frames[1].to_string() : ""};
  }
  int drain() {
    int n = 0;
    std::vector<zmq::message_t> frames;
    while (zmq::recv_multipart(socket, std::back_inserter(frames), zmq::recv_flags::dontwait)) ++n;
    return n;
  }
  zmq::context_t context{1};
  zmq::socket_t socket;
};

std::string bytes_of(const void* p, size_t n) {
  return std::string(static_cast<const char*>(p), n);
}
std::string header_bytes(const MessageHeader& h) {
  return bytes_of(&h, sizeof h);
}

std::string hello_frame(const ShardLayout& layout, int hosts, int shard,
                        ConnectionRole role = ConnectionRole::kPush) {
  HelloBody body{layout.fingerprint(), hosts, layout.num_shards, shard, static_cast<int32_t>(role)};
  return bytes_of(&body, sizeof body);
}

TEST(ShardSecurity, WrongTokenIsRefusedAndTheShardKeepsServing) {
  Cluster cluster(1, 2, {100, 300});
  PsClientConfig bad = cluster.client(0, milliseconds(5000));
  bad.token = "not-the-cluster-token-at-all";
  const std::string what = network_error([&] { PsClient client(bad); });
  EXPECT_NE(what.find("shard 0 (" + cluster.endpoints[0] + ") refused this host's proof of rank 0"),
            std::string::npos)
      << what;
  // A peer without PLAIN credentials fails ZeroMQ's handshake and never reaches the loop.
  zmq::context_t context;
  zmq::socket_t anonymous(context, zmq::socket_type::dealer);
  anonymous.set(zmq::sockopt::linger, 0);
  anonymous.connect(cluster.endpoints[0]);
  const MessageHeader h = make_header(MessageKind::kBye, 0);
  anonymous.send(zmq::buffer(&h, sizeof h));
  expect_fixed_order_sum(cluster, true, 2);
  EXPECT_TRUE(
      cluster.log.contains("refused a connection from 127.0.0.1 (user 'host-0'): no valid proof "
                           "of rank under this cluster's token"));
  // The hosts' byes reach the shard after their clients return: wait for them before counting.
  EXPECT_TRUE(cluster.servers[0]->wait(milliseconds(10000)));
  const ShardStats stats = cluster.servers[0]->stats();
  EXPECT_GE(stats.connections_refused, 1);
  EXPECT_EQ(stats.messages_rejected, 0);
  EXPECT_EQ(stats.hosts_said_bye, 2);
}

// The known answer from an independent HMAC (Python: hmac.new(token, b"cgdp host 3", sha256)).
TEST(RankProof, IsHmacSha256OfTheRankUnderTheToken) {
  EXPECT_EQ(rank_proof(kToken, 3), "d88bd660288090f3cd0e79f1c46049e695ec61169dfd3d10bd7d52c7d1423c92");
  EXPECT_EQ(rank_user(3), "host-3");
  EXPECT_EQ(proven_rank(kToken, "host-3", rank_proof(kToken, 3)), 3);
  EXPECT_EQ(proven_rank(kToken, "host-0", rank_proof(kToken, 3)), std::nullopt);  // another rank's
  EXPECT_EQ(proven_rank(kToken, "host-03", rank_proof(kToken, 3)), std::nullopt);  // one spelling
  EXPECT_EQ(proven_rank(kToken, "host-3", kToken), std::nullopt);  // the token is no proof
  EXPECT_EQ(proven_rank("another-token-0123456789", "host-3", rank_proof(kToken, 3)), std::nullopt);
  EXPECT_EQ(proven_rank(kToken, "host--1", rank_proof(kToken, -1)), std::nullopt);
}

// Before: any peer holding the token could say hello as host 0 first (its sum connection), and
// the real host 0 was then turned away. Now a connection speaks only for the rank it proved, the
// token never crosses the network (it is no longer a valid password), and host 0 joins normally.
TEST(ShardSecurity, AConnectionSpeaksOnlyForTheRankItProved) {
  Cluster cluster(1, 2, {100, 300});
  const ShardLayout layout = assign_ranges(cluster.chunk_sizes, 1);
  RawPeer host1(cluster.endpoints[0], 1);
  for (ConnectionRole role : {ConnectionRole::kSum, ConnectionRole::kPush}) {
    host1.send({header_bytes(make_header(MessageKind::kHello, 0)), hello_frame(layout, 2, 0, role)});
    const auto [h, text] = host1.receive();
    EXPECT_EQ(h.kind, static_cast<uint16_t>(MessageKind::kError));
    EXPECT_EQ(text, "a connection that proved host 1 said hello as host 0");
  }
  // The old credential (the token as the password) and another rank's proof are both refused at
  // the handshake: nothing they send is answered.
  RawPeer token_as_password(cluster.endpoints[0], "host-0", kToken);
  RawPeer borrowed_proof(cluster.endpoints[0], "host-0", rank_proof(kToken, 1));
  for (RawPeer* peer : {&token_as_password, &borrowed_proof}) {
    // Without a handshake there is no pipe to queue on: don't block on the send.
    peer->send({header_bytes(make_header(MessageKind::kHello, 0)), hello_frame(layout, 2, 0)},
               zmq::send_flags::dontwait);
    EXPECT_EQ(peer->receive(milliseconds(300)).first.kind, 0);
  }
  expect_fixed_order_sum(cluster, true, 2);  // hosts 0 and 1 join and sum as usual
  EXPECT_TRUE(cluster.log.contains("(user 'host-0'): no valid proof of rank"));
  EXPECT_GE(cluster.servers[0]->stats().connections_refused, 2);
}

TEST(ShardSecurity, MismatchedHelloIsRejectedWithTheReason) {
  Cluster cluster(2, 2, {100, 300});
  PsClientConfig other_plan = cluster.client(0, milliseconds(5000));
  other_plan.chunk_sizes = {100, 301};
  std::string what = network_error([&] { PsClient client(other_plan); });
  EXPECT_NE(what.find("rejected the hello of host 0: host 0 has a different chunk plan"),
            std::string::npos)
      << what;
  // The shard's layout fingerprint stays in its own log: a reply never says what would pass.
  EXPECT_EQ(what.find("fingerprint"), std::string::npos) << what;
  EXPECT_TRUE(cluster.log.contains("host 0's chunk plan has layout fingerprint "));
  PsClientConfig other_hosts = cluster.client(2, milliseconds(5000));
  other_hosts.num_hosts = 3;
  what = network_error([&] { PsClient client(other_hosts); });
  EXPECT_NE(what.find("expects 3 hosts"), std::string::npos) << what;
  PsClientConfig swapped = cluster.client(0, milliseconds(5000));
  std::swap(swapped.shards[0], swapped.shards[1]);
  what = network_error([&] { PsClient client(swapped); });
  EXPECT_NE(what.find("rejected the hello of host 0: host 0 expects 2 hosts and shard "),
            std::string::npos)
      << what;
  EXPECT_THROW(PsClient(cluster.client(2)), UsageError);  // rank outside [0, 2)
}

// A shard of another protocol version (here a bare ROUTER behind the shard's ZAP handler,
// answering as version 1 would) is named with both versions at the hello, not left to time out.
TEST(ShardSecurity, ShardOfAnotherProtocolVersionIsNamedAtTheHello) {
  zmq::context_t context;
  const ShardLog quiet = [](const std::string&) {};
  ZapHandler zap(context, kToken, quiet);
  zmq::socket_t old_shard(context, zmq::socket_type::router);
  old_shard.set(zmq::sockopt::plain_server, 1);
  old_shard.set(zmq::sockopt::zap_domain, "cgdp");
  old_shard.set(zmq::sockopt::linger, 0);
  old_shard.bind("tcp://127.0.0.1:*");
  const std::string endpoint = old_shard.get(zmq::sockopt::last_endpoint);
  std::thread answer([&] {
    std::vector<zmq::pollitem_t> items = {{old_shard.handle(), 0, ZMQ_POLLIN, 0},
                                          {zap.socket().handle(), 0, ZMQ_POLLIN, 0}};
    for (int i = 0; i < 100; ++i) {  // at most 5 s
      zmq::poll(items, milliseconds(50));
      if (items[1].revents & ZMQ_POLLIN) zap.handle_one();
      if (!(items[0].revents & ZMQ_POLLIN)) continue;
      std::vector<zmq::message_t> frames;
      (void)zmq::recv_multipart(old_shard, std::back_inserter(frames));
      MessageHeader h = make_header(MessageKind::kWelcome, 0);
      h.version = 1;
      std::array<zmq::const_buffer, 2> reply = {zmq::buffer(frames[0].data(), frames[0].size()),
                                                zmq::buffer(&h, sizeof h)};
      zmq::send_multipart(old_shard, reply);
      return;
    }
  });
  const std::string what = network_error([&] {
    PsClient client(PsClientConfig{{endpoint}, 0, 1, {10}, kToken, milliseconds(5000)});
  });
  answer.join();
  EXPECT_EQ(what, "shard 0 (" + endpoint +
                      ") answered the hello with a message this build cannot read: protocol "
                      "version 1; this build speaks 2");
}

TEST(ShardSecurity, NoShardListeningTimesOutNamingIt) {
  std::string endpoint;
  {
    Cluster gone(1, 1, {10});
    endpoint = gone.endpoints[0];
  }
  const std::string what = network_error([&] {
    PsClient client(PsClientConfig{{endpoint}, 0, 1, {10}, kToken, milliseconds(300)});
  });
  EXPECT_EQ(what, "no answer from shard 0 (" + endpoint +
                      ") for 300 ms (is it running and listening there?)");
}

TEST(ShardProtocolErrors, OutOfStepAndMalformedMessagesGetErrorReplies) {
  Cluster cluster(1, 2, {64, 32});
  const ShardLayout layout = assign_ranges(cluster.chunk_sizes, 1);
  RawPeer peer(cluster.endpoints[0], 1);
  peer.send({header_bytes(make_header(MessageKind::kHello, 1)), hello_frame(layout, 2, 0)});
  EXPECT_EQ(peer.receive().first.kind, static_cast<uint16_t>(MessageKind::kWelcome));
  const ShardPiece& p = layout.pieces[1];  // elements [64, +32)
  auto header = [&](MessageKind kind, int sender, int range, int64_t it, int64_t count) {
    return header_bytes(make_header(kind, sender, range, it, p.offset, count));
  };
  const std::string payload(p.count * 4, '\0');
  auto expect_error = [&](std::vector<std::string> frames, const std::string& text) {
    peer.send(std::move(frames));
    const auto [h, reply] = peer.receive();
    EXPECT_EQ(h.kind, static_cast<uint16_t>(MessageKind::kError)) << text;
    EXPECT_NE(reply.find(text), std::string::npos) << reply;
  };
  using K = MessageKind;
  expect_error({header(K::kPush, 1, 1, 0, 31), payload}, "range 1 is elements [64, +32), not");
  expect_error({header(K::kPush, 1, 1, 0, 32), payload.substr(1)},
               "push of range 1 carries 127 payload bytes; expected 128");
  expect_error({header(K::kPush, 1, 1, 0, 32)}, "push of range 1 carries 0 payload bytes");
  expect_error({header(K::kPush, 0, 1, 0, 32), payload},
               "sender 0 on a connection that said hello as host 1");
  expect_error({header(K::kPush, 1, 5, 0, 32), payload}, "range 5 is not on shard 0");
  expect_error({header(K::kPush, 1, 1, -3, 32), payload}, "iteration -3 is negative");
  peer.send({header(K::kPush, 1, 1, 5, 32), payload});  // accepted: no reply
  expect_error({header(K::kPush, 1, 1, 5, 32), payload}, "host 1 already pushed iteration 5");
  expect_error({header(K::kPush, 1, 1, 7, 32), payload}, "iteration 7 is out of step");
  expect_error({header(K::kSum, 1, 1, 5, 32), payload}, "does not accept sum messages");
  expect_error({header(K::kPush, 1, 1, 5, 32), payload, "x"}, "3 frames; expected a header");
  expect_error({std::string(39, 'h')}, "header frame of 39 bytes; expected 40");
  expect_error({header(K::kHello, 1, -1, 0, 0), "short"}, "hello needs a 24-byte body");
  EXPECT_EQ(cluster.servers[0]->stats().messages_rejected, 12);
  EXPECT_TRUE(
      cluster.log.contains("rejected push (iteration 5, range 1) from host 1 (127.0.0.1): "
                           "host 1 already pushed iteration 5"));
}

// Sums go, unasked, to the one sum connection each host opened; a host's errors go there too,
// since that is where its pull waits.
TEST(ShardProtocolErrors, SumConnectionGetsTheSumsAndTheHostsErrors) {
  Cluster cluster(1, 2, {16});
  const ShardLayout layout = assign_ranges(cluster.chunk_sizes, 1);
  auto hello = [&](RawPeer& peer, int host, ConnectionRole role) {
    peer.send(
        {header_bytes(make_header(MessageKind::kHello, host)), hello_frame(layout, 2, 0, role)});
    return peer.receive();
  };
  RawPeer sums(cluster.endpoints[0], 1), pushes(cluster.endpoints[0], 1),
      second_sums(cluster.endpoints[0], 1), other(cluster.endpoints[0], 0);
  EXPECT_EQ(hello(sums, 1, ConnectionRole::kSum).first.kind,
            static_cast<uint16_t>(MessageKind::kWelcome));
  EXPECT_NE(hello(second_sums, 1, ConnectionRole::kSum)
                .second.find("host 1 already has a sum connection"),
            std::string::npos);
  EXPECT_NE(hello(other, 0, static_cast<ConnectionRole>(7))
                .second.find("connection role 7; expected 0 (pushes) or 1 (sums)"),
            std::string::npos);
  EXPECT_EQ(hello(pushes, 1, ConnectionRole::kPush).first.kind,
            static_cast<uint16_t>(MessageKind::kWelcome));
  EXPECT_EQ(hello(other, 0, ConnectionRole::kPush).first.kind,
            static_cast<uint16_t>(MessageKind::kWelcome));
  const ShardPiece& p = layout.pieces[0];
  auto push = [&](RawPeer& peer, int host, int64_t iteration, float value) {
    const std::vector<float> g(p.count, value);
    peer.send({header_bytes(make_header(MessageKind::kPush, host, 0, iteration, 0, p.count)),
               bytes_of(g.data(), g.size() * 4)});
  };
  push(sums, 1, 0, 1.f);
  auto [h, text] = sums.receive();
  EXPECT_EQ(h.kind, static_cast<uint16_t>(MessageKind::kError));
  EXPECT_NE(text.find("a push on host 1's sum connection"), std::string::npos) << text;
  push(pushes, 1, 3, 1.f);
  push(pushes, 1, 9, 1.f);  // out of step: the error goes to host 1's sum connection
  std::tie(h, text) = sums.receive();
  EXPECT_NE(text.find("iteration 9 is out of step"), std::string::npos) << text;
  EXPECT_EQ(pushes.receive(milliseconds(200)).first.kind, 0);  // nothing on the push connection
  push(other, 0, 3, 2.f);  // host 0 completes iteration 3: host 1 gets the sum, unasked
  zmq::message_t head, body;
  sums.socket.set(zmq::sockopt::rcvtimeo, 5000);
  ASSERT_TRUE(sums.socket.recv(head));
  ASSERT_TRUE(sums.socket.recv(body));
  std::memcpy(&h, head.data(), sizeof h);
  EXPECT_EQ(h.kind, static_cast<uint16_t>(MessageKind::kSum));
  EXPECT_EQ(h.iteration, 3);
  ASSERT_EQ(body.size(), static_cast<size_t>(p.count) * 4);
  EXPECT_EQ(body.data<float>()[p.count - 1], 3.f);
  EXPECT_EQ(other.receive(milliseconds(200)).first.kind, 0);  // host 0 has no sum connection
  EXPECT_TRUE(
      cluster.log.contains("host 0 has no sum connection; its sum of range 0, iteration "
                           "3 is dropped"));
  EXPECT_EQ(cluster.servers[0]->stats().sums_sent, 1);
}

// Thousands of random, truncated and mutated frames from an authenticated peer that never said a
// valid hello, garbage bytes on raw TCP connections and an oversized frame: afterwards the shard
// still answers correct sums.
TEST(ShardFuzz, GarbageNeverCrashesOrStallsTheShard) {
  Cluster cluster(2, 3, {5, 1000, 37, 3000});
  const ShardLayout layout = assign_ranges(cluster.chunk_sizes, 2);
  RawPeer peer(cluster.endpoints[0]);
  std::mt19937_64 rng(20240611);
  auto random_bytes = [&](size_t n) {
    std::string s(n, '\0');
    for (char& c : s) c = static_cast<char>(rng());
    return s;
  };
  const auto pieces = layout.pieces_of_shard(0);
  for (int i = 0; i < 4000; ++i) {
    const ShardPiece& p = pieces[rng() % pieces.size()];
    const int kind = 1 + static_cast<int>(rng() % (kLastKind + 1));  // one unknown kind too
    MessageHeader h = make_header(static_cast<MessageKind>(kind), static_cast<int>(rng() % 4),
                                  p.range, static_cast<int64_t>(rng() % 3), p.offset, p.count);
    std::vector<std::string> frames = {header_bytes(h)};
    if (kind == static_cast<int>(MessageKind::kHello)) {
      HelloBody body{rng(), 3, 2, 0, 0};  // a fingerprint that never matches
      frames.push_back(bytes_of(&body, sizeof body));
    } else if (rng() % 2) {
      frames.push_back(random_bytes(rng() % 2 ? p.count * 4 : rng() % 64));
    }
    switch (rng() % 4) {
      case 0:  // flip a few bytes anywhere
        for (int k = 0; k < 3; ++k) {
          std::string& f = frames[rng() % frames.size()];
          if (!f.empty()) f[rng() % f.size()] ^= static_cast<char>(1 + rng() % 255);
        }
        break;
      case 1:  // truncate a frame
        frames.back().resize(rng() % (frames.back().size() + 1));
        break;
      case 2:  // nothing but noise
        frames.assign(1 + rng() % 3, "");
        for (auto& f : frames) f = random_bytes(rng() % 80);
        break;
      default:  // well-formed, but from a peer without a valid hello
        break;
    }
    peer.send(frames);
    if (i % 256 == 0) peer.drain();
  }
  for (int i = 0; i < 20; ++i) {  // raw TCP garbage: not even ZMTP
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(
        std::stoi(cluster.endpoints[1].substr(cluster.endpoints[1].rfind(':') + 1))));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
      const std::string junk = random_bytes(1 + rng() % 200);
      (void)::write(fd, junk.data(), junk.size());
    }
    ::close(fd);
  }
  RawPeer big(cluster.endpoints[1]);  // a frame over the largest piece: ZeroMQ drops the peer
  big.send({header_bytes(make_header(MessageKind::kPush, 0, 0)), std::string(1 << 20, 'x')});
  expect_fixed_order_sum(cluster, false, 3);
  EXPECT_GT(cluster.servers[0]->stats().messages_rejected, 3000);
  EXPECT_EQ(cluster.servers[1]->stats().messages_rejected, 0);
  EXPECT_TRUE(cluster.log.contains("rejected"));
  EXPECT_TRUE(cluster.log.contains("disconnected"));
}

// Shard 1 of 2 in a child process (forked before this process starts any thread of its own, and
// serving one host, so the child never needs OpenMP); shard 0 in this process.
class TwoShardsOneRemote {
 public:
  explicit TwoShardsOneRemote(std::vector<int64_t> chunks) : chunks_(std::move(chunks)) {
    int fds[2];
    if (::pipe(fds) != 0) throw std::runtime_error("pipe failed");
    child_ = ::fork();
    if (child_ == 0) {
      ::close(fds[0]);
      serve_in_child(fds[1]);
    }
    ::close(fds[1]);
    char buffer[256];
    ssize_t n;
    while ((n = ::read(fds[0], buffer, sizeof buffer)) > 0) remote_.append(buffer, n);
    ::close(fds[0]);
    if (remote_.empty()) throw std::runtime_error("the shard process did not start");
    local_ = std::make_unique<ShardServer>(config(0));
  }
  ~TwoShardsOneRemote() {
    ::kill(child_, SIGKILL);
    ::waitpid(child_, nullptr, 0);
  }
  PsClientConfig client() const {
    return {{local_->endpoint(), remote_}, 0, 1, chunks_, kToken, milliseconds(1000)};
  }
  // Returns once a SIGSTOP has taken effect: kill() only queues it, and a running child may
  // still answer a message or two.
  void signal(int sig) {
    ::kill(child_, sig);
    if (sig == SIGSTOP) {
      int status = 0;
      ::waitpid(child_, &status, WUNTRACED);
    }
  }
  const std::string& remote() const { return remote_; }

 private:
  ShardConfig config(int shard) const {
    ShardConfig c;
    c.shard = shard;
    c.num_shards = 2;
    c.chunk_sizes = chunks_;
    c.token = kToken;
    c.log = [](const std::string&) {};
    return c;
  }
  [[noreturn]] void serve_in_child(int fd) {
    try {
      ShardServer server(config(1));
      (void)::write(fd, server.endpoint().data(), server.endpoint().size());
      ::close(fd);
      server.wait();
    } catch (...) {
    }
    ::_exit(0);
  }
  std::vector<int64_t> chunks_;
  pid_t child_ = -1;
  std::string remote_;
  std::unique_ptr<ShardServer> local_;
};

// One iteration of push and pull for every chunk, in place.
void exchange(PsClient& client, std::vector<float>& g, int64_t iteration) {
  int64_t offset = 0;
  for (int c = 0; c < client.layout().num_chunks(); ++c) {
    client.push(iteration, c, g.data() + offset, client.layout().chunk_sizes[c]);
    client.pull(iteration, c, g.data() + offset, client.layout().chunk_sizes[c]);
    offset += client.layout().chunk_sizes[c];
  }
}

TEST(ShardFailure, KilledShardFailsThePullNamingIt) {
  TwoShardsOneRemote shards({300, 500});  // chunk 0 on shard 0, chunk 1 on shard 1
  std::vector<float> g(800, 1.f);  // before the client: a failed push may be read until it is gone
  PsClient client(shards.client());
  exchange(client, g, 0);
  EXPECT_EQ(g[799], 1.f);
  shards.signal(SIGKILL);
  const std::string what = network_error([&] { exchange(client, g, 1); });
  EXPECT_NE(what.find("shard 1 (" + shards.remote() + ")"), std::string::npos) << what;
}

TEST(ShardFailure, FrozenShardTimesOutNamingIt) {
  TwoShardsOneRemote shards({300, 500});
  std::vector<float> g(800, 1.f);  // before the client: a failed push may be read until it is gone
  PsClient client(shards.client());
  exchange(client, g, 0);
  shards.signal(SIGSTOP);
  const std::string what = network_error([&] { exchange(client, g, 1); });
  EXPECT_EQ(what, "no sum from shard 1 (" + shards.remote() +
                      ") for 1 s while pulling iteration 1, chunk 1");
}

// ZeroMQ's heartbeats close the connection to a frozen shard even while the host is idle, so the
// next push fails at once instead of a later pull waiting out its timeout.
TEST(ShardFailure, FrozenShardIsDetectedWhileIdle) {
  TwoShardsOneRemote shards({300, 500});
  PsClientConfig config = shards.client();
  config.timeout = std::chrono::seconds(60);
  std::vector<float> g(800, 1.f);  // before the client: a failed push may be read until it is gone
  PsClient client(config);
  exchange(client, g, 0);
  shards.signal(SIGSTOP);
  std::string what;
  for (int attempt = 0; attempt < 100 && what.empty(); ++attempt) {  // at most 20 s
    try {
      client.push(1, 1, g.data() + 300, 500);
      std::this_thread::sleep_for(milliseconds(200));
    } catch (const NetworkError& e) {
      what = e.what();
    }
  }
  EXPECT_EQ(what, "lost the connection to shard 1 (" + shards.remote() +
                      ") while pushing iteration 1, chunk 1");
}

}  // namespace
}  // namespace cgdp
