// The shard's thread: authenticates peers (a challenge-response, handshake_proof.hpp), validates
// every frame against the shard's own ranges before touching memory, feeds pushes to the pieces'
// BSP state, and sends each finished sum to every host's sum connection.
#include "cgdp/shard/shard_server.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <iostream>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "cgdp/core/error.hpp"
#include "cgdp/shard/handshake_proof.hpp"
#include "cgdp/shard/protocol.hpp"
#include "cgdp/shard/shard_layout.hpp"
#include "cgdp/shard/zmtp3_only.hpp"
#include "shard/message_memory.hpp"
#include "shard/piece_state.hpp"
#include "shard/socket_monitor.hpp"

namespace cgdp {

void log_to_stderr(const std::string& line) {
  std::cerr << "cgdp shard: " << line << "\n";
}

namespace {

constexpr int kHeartbeatMs = 1000;
constexpr auto kPollSlice = std::chrono::milliseconds(50);  // how soon stop() is noticed
// Messages (or connection events) handled in a row before the loop looks at the other socket and
// at stop().
constexpr int kPerPass = 256;

void check_config(const ShardConfig& c) {
  if (c.num_hosts < 1)
    throw UsageError(cat("shard: number of hosts must be >= 1, got ", c.num_hosts));
  if (c.shard < 0 || c.shard >= c.num_shards)
    throw UsageError(cat("shard index ", c.shard, " is outside [0, ", c.num_shards, ")"));
  if (c.token.empty()) throw UsageError("shard: no cluster token");
  for (const int owner : c.chunk_owners)
    if (owner >= c.num_hosts)
      throw UsageError(cat("shard: a chunk gathered from host ", owner, " of ", c.num_hosts));
}

}  // namespace

class ShardServer::Impl {
 public:
  explicit Impl(ShardConfig config);
  ~Impl() { stop(); }
  void stop();
  bool wait(std::chrono::milliseconds timeout);
  ShardStats stats() const {
    std::lock_guard lock(mutex_);
    return stats_;
  }
  std::string endpoint;

 private:
  struct Peer {
    int host = -1;
    std::string address;
    ConnectionRole role = ConnectionRole::kPush;
  };
  void run();
  void serve_router();
  void handle(std::vector<zmq::message_t>& frames);
  std::string check_push(const MessageHeader& h, const Peer* peer, size_t payload_frames,
                         size_t payload_bytes) const;
  // A hello is answered with a challenge; the connection joins once its proof checks.
  std::string hello(const std::string& route, Peer from, const MessageHeader& h,
                    const std::vector<zmq::message_t>& frames);
  std::string proof(const std::string& route, const MessageHeader& h,
                    const std::vector<zmq::message_t>& frames);
  // The hello's checks against this shard, once its sender proved its rank.
  std::string join(const std::string& route, Peer from, const HelloBody& body);
  std::string bye(const MessageHeader& h, const Peer* peer);
  void send_sum(int local_piece);
  void hold(int host, const MessageHeader& h, zmq::message_t sum);
  void send_held(int host);  // once its sum connection joined
  // Logs and answers a rejected message; `peer` is its connection's hello, if it said one.
  void reject(zmq::message_t& route, const Peer* peer, const std::string& from,
              const MessageHeader* h, const std::string& why);
  void send(zmq::message_t& route, const MessageHeader& h, zmq::message_t* payload);
  void log_events();
  // Inside run()'s catch: logs why the shard stops and keeps the exception for wait().
  void record_error(const std::string& what);
  template <typename F>
  void count(F f) {
    std::lock_guard lock(mutex_);
    f(stats_);
  }

  ShardConfig config_;
  ShardLayout layout_;
  int first_piece_ = 0;                  // this shard's pieces: [first_piece_, first_piece_ + n)
  std::deque<PieceState> pieces_;        // by local index (a deque: PieceState does not move)
  struct Handshake {
    std::string route;  // the connection's ROUTER identity
    Peer from;
    HelloBody hello;
    Nonce shard_nonce;
  };
  std::map<std::string, Peer> peers_;  // by ROUTER identity, after a good hello and proof
  // Challenges sent and not answered yet, oldest first: a bounded few (searched in order), so
  // peers that never answer cannot grow them.
  std::deque<Handshake> handshakes_;
  std::vector<std::string> sum_routes_;  // by host: its sum connection's identity, once known
  // By host: sums that completed before its sum connection joined (gathered pieces only).
  std::vector<std::deque<std::pair<MessageHeader, zmq::message_t>>> held_;
  int64_t max_frame_ = 0;

  zmq::context_t context_{1};
  zmq::socket_t router_;
  std::unique_ptr<SocketMonitor> monitor_;

  mutable std::mutex mutex_;
  std::condition_variable finished_cv_;
  bool finished_ = false;
  std::exception_ptr error_;
  ShardStats stats_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

ShardServer::Impl::Impl(ShardConfig config) : config_(std::move(config)) {
  check_config(config_);
  keep_message_buffers_in_heap();
  layout_ =
      assign_ranges(config_.chunk_sizes, config_.num_shards, config_.limits, config_.chunk_owners);
  const auto mine = layout_.pieces_of_shard(config_.shard);
  first_piece_ = mine.empty() ? 0 : mine.front().range;
  for (const ShardPiece& p : mine) {
    pieces_.emplace_back(config_.num_hosts, p.count, config_.sum_threads, p.owner);
    max_frame_ = std::max<int64_t>(max_frame_, p.count * sizeof(float));
  }
  sum_routes_.assign(config_.num_hosts, "");
  held_.resize(config_.num_hosts);
  router_ = zmq::socket_t(context_, zmq::socket_type::router);
  monitor_ =
      std::make_unique<SocketMonitor>(context_, router_,
                                      ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                                          ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL);
  // Frames above the largest piece (or a hello) are dropped by ZeroMQ with the connection,
  // before any memory is allocated for them.
  router_.set(zmq::sockopt::maxmsgsize, std::max<int64_t>(max_frame_, 4096));
  router_.set(zmq::sockopt::sndhwm,
              static_cast<int>(4 * pieces_.size() * config_.num_hosts + 1000));
  router_.set(zmq::sockopt::heartbeat_ivl, kHeartbeatMs);
  router_.set(zmq::sockopt::heartbeat_timeout, 3 * kHeartbeatMs);
  router_.set(zmq::sockopt::linger, 0);
  accept_zmtp3_peers_only(router_);
  try {
    router_.bind(config_.address);
  } catch (const zmq::error_t& e) {
    throw NetworkError(
        cat("shard ", config_.shard, ": cannot listen on ", config_.address, ": ", e.what()));
  }
  endpoint = router_.get(zmq::sockopt::last_endpoint);
  config_.log(cat("shard ", config_.shard, " of ", config_.num_shards, " listening on ", endpoint,
                  " for ", config_.num_hosts, " hosts, ", pieces_.size(), " pieces"));
  thread_ = std::thread([this] { run(); });
}

void ShardServer::Impl::stop() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
}

bool ShardServer::Impl::wait(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  const bool done = timeout == std::chrono::milliseconds::max()
                        ? (finished_cv_.wait(lock, [&] { return finished_; }), true)
                        : finished_cv_.wait_for(lock, timeout, [&] { return finished_; });
  if (done && error_) std::rethrow_exception(error_);
  return done;
}

void ShardServer::Impl::run() {
  try {
    std::vector<zmq::pollitem_t> items = {{router_.handle(), 0, ZMQ_POLLIN, 0},
                                          {monitor_->socket().handle(), 0, ZMQ_POLLIN, 0}};
    while (!stopping_) {
      zmq::poll(items, kPollSlice);
      if (items[1].revents & ZMQ_POLLIN) log_events();
      if (items[0].revents & ZMQ_POLLIN) serve_router();
    }
  } catch (const std::exception& e) {
    record_error(e.what());
  } catch (...) {
    record_error("an exception of unknown type");
  }
  const ShardStats s = stats();
  config_.log(cat("shard ", config_.shard, " stopped: ", s.pieces_summed, " sums, ", s.sums_sent,
                  " sums sent, ", s.messages_rejected, " messages rejected, ",
                  s.connections_refused, " connections refused"));
  std::lock_guard lock(mutex_);
  finished_ = true;
  finished_cv_.notify_all();
}

void ShardServer::Impl::record_error(const std::string& what) {
  config_.log(cat("shard ", config_.shard, " failed: ", what));
  std::lock_guard lock(mutex_);
  error_ = std::current_exception();
}

void ShardServer::Impl::log_events() {
  // A bounded number, as serve_router(): strangers' connection events cannot keep the hosts'
  // messages waiting.
  for (int i = 0; i < kPerPass; ++i) {
    const auto e = monitor_->next();
    if (!e) return;
    config_.log(cat("connection on ", e->endpoint, ": ", event_name(e->event),
                    e->event == ZMQ_EVENT_DISCONNECTED
                        ? cat(" (the peer left, or sent a frame over ",
                              std::max<int64_t>(max_frame_, 4096), " bytes or broke ZMTP)")
                        : std::string()));
  }
}

void ShardServer::Impl::serve_router() {
  // Drain what is queued, but come back to the monitor and stop() now and then.
  for (int i = 0; i < kPerPass && !stopping_; ++i) {
    std::vector<zmq::message_t> frames;
    if (!zmq::recv_multipart(router_, std::back_inserter(frames), zmq::recv_flags::dontwait))
      return;
    handle(frames);
  }
}

void ShardServer::Impl::handle(std::vector<zmq::message_t>& frames) {
  zmq::message_t& route = frames[0];
  const std::string id = route.to_string();
  const auto known = peers_.find(id);
  const Peer* peer = known == peers_.end() ? nullptr : &known->second;
  // nullptr when ZeroMQ attached no metadata (a stranger's frame may come without).
  const char* address =
      frames.size() > 1 ? zmq_msg_gets(frames[1].handle(), "Peer-Address") : nullptr;
  const std::string from = peer ? cat("host ", peer->host, " (", peer->address, ")")
                                : cat("unregistered peer ", address ? address : "?");
  if (frames.size() < 2 || frames.size() > 3)
    return reject(route, peer, from, nullptr,
                  cat(frames.size() - 1, " frames; expected a header and at most one payload"));
  MessageHeader h;
  if (std::string why = parse_header(frames[1].data(), frames[1].size(), h); !why.empty())
    return reject(route, peer, from, nullptr, why);
  const size_t payload_frames = frames.size() - 2;
  const size_t payload_bytes = payload_frames ? frames[2].size() : 0;
  std::string why;
  switch (static_cast<MessageKind>(h.kind)) {
    case MessageKind::kHello:
      why = hello(id, Peer{h.sender, address ? address : "?"}, h, frames);
      break;
    case MessageKind::kProof:
      why = proof(id, h, frames);
      break;
    case MessageKind::kPush: {
      why = check_push(h, peer, payload_frames, payload_bytes);
      if (!why.empty()) break;
      why = pieces_[h.range - first_piece_].push(h.iteration, h.sender,
                                                 aligned_floats(std::move(frames[2])));
      if (why.empty()) send_sum(h.range - first_piece_);
      break;
    }
    case MessageKind::kBye:
      why = bye(h, peer);
      break;
    default:
      why = cat("a shard does not accept ", kind_name(h.kind), " messages");
  }
  if (!why.empty()) reject(route, peer, from, &h, why);
}

std::string ShardServer::Impl::hello(const std::string& route, Peer from, const MessageHeader& h,
                                     const std::vector<zmq::message_t>& frames) {
  if (const auto known = peers_.find(route); known != peers_.end())
    return cat("a second hello on a connection of host ", known->second.host);
  if (frames.size() != 3 || frames[2].size() != sizeof(HelloBody))
    return cat("hello needs a ", sizeof(HelloBody), "-byte body");
  if (h.sender < 0 || h.sender >= config_.num_hosts)
    return cat("host rank ", h.sender, " is outside [0, ", config_.num_hosts, ")");
  std::erase_if(handshakes_, [&](const Handshake& s) { return s.route == route; });  // a new hello
  if (handshakes_.size() >= static_cast<size_t>(4 * config_.num_hosts + 16))
    handshakes_.pop_front();  // the oldest unanswered challenge lapses
  Handshake& shake = handshakes_.emplace_back(Handshake{route, from, {}, fresh_nonce()});
  std::memcpy(&shake.hello, frames[2].data(), sizeof shake.hello);
  const ChallengeBody challenge{
      shake.shard_nonce, shard_proof(config_.token, h.sender, shake.hello, shake.shard_nonce)};
  zmq::message_t id(route.data(), route.size());
  zmq::message_t body(&challenge, sizeof challenge);
  send(id, make_header(MessageKind::kChallenge, config_.shard), &body);
  return "";
}

std::string ShardServer::Impl::proof(const std::string& route, const MessageHeader& h,
                                     const std::vector<zmq::message_t>& frames) {
  const auto found = std::find_if(handshakes_.begin(), handshakes_.end(),
                                  [&](const Handshake& s) { return s.route == route; });
  if (found == handshakes_.end()) return "a proof on a connection without a challenge";
  const Handshake shake = *found;
  handshakes_.erase(found);  // one answer per challenge
  if (h.sender != shake.from.host)
    return cat("a proof from host ", h.sender, " on a connection that said hello as host ",
               shake.from.host);
  ProofBody answer;
  if (frames.size() != 3 || frames[2].size() != sizeof answer)
    return cat("proof needs a ", sizeof answer, "-byte body");
  std::memcpy(&answer, frames[2].data(), sizeof answer);
  if (!same_proof(answer.host_proof,
                  host_proof(config_.token, h.sender, shake.hello, shake.shard_nonce))) {
    count([](ShardStats& s) { ++s.connections_refused; });
    return cat("no valid proof of host ", h.sender,
               " under this cluster's token (a different token on that host?)");
  }
  return join(route, shake.from, shake.hello);
}

std::string ShardServer::Impl::join(const std::string& route, Peer from, const HelloBody& body) {
  const int host = from.host;
  if (body.num_hosts != config_.num_hosts || body.num_shards != config_.num_shards ||
      body.shard != config_.shard)
    return cat("host ", host, " expects ", body.num_hosts, " hosts and shard ", body.shard, " of ",
               body.num_shards, "; this is shard ", config_.shard, " of ", config_.num_shards,
               " for ", config_.num_hosts, " hosts");
  if (body.layout_fingerprint != layout_.fingerprint()) {
    // The values go to this shard's log only: a reply never tells a peer what would be accepted.
    config_.log(cat("host ", host, "'s chunk plan has layout fingerprint ", std::hex,
                    body.layout_fingerprint, ", this shard's ", layout_.fingerprint()));
    return cat("host ", host, " has a different chunk plan (give every host the same --chunk)");
  }
  if (body.role != static_cast<int32_t>(ConnectionRole::kPush) &&
      body.role != static_cast<int32_t>(ConnectionRole::kSum))
    return cat("connection role ", body.role, "; expected 0 (pushes) or 1 (sums)");
  from.role = static_cast<ConnectionRole>(body.role);
  if (from.role == ConnectionRole::kSum && !sum_routes_[host].empty())
    return cat("host ", host, " already has a sum connection");
  if (peers_.size() >= static_cast<size_t>(64 * config_.num_hosts)) return "too many connections";
  peers_[route] = from;
  if (from.role == ConnectionRole::kSum) sum_routes_[host] = route;
  config_.log(cat("host ", host, " (", from.address, ") joined",
                  from.role == ConnectionRole::kSum ? " (sum connection)" : ""));
  zmq::message_t id(route.data(), route.size());
  send(id, make_header(MessageKind::kWelcome, config_.shard), nullptr);
  if (from.role == ConnectionRole::kSum) send_held(host);
  return "";
}

std::string ShardServer::Impl::check_push(const MessageHeader& h, const Peer* peer,
                                          size_t payload_frames, size_t payload_bytes) const {
  // Every field is checked against this shard's own ranges first, the peer last.
  const int local = h.range - first_piece_;
  if (h.range < 0 || local < 0 || local >= static_cast<int>(pieces_.size()))
    return cat("range ", h.range, " is not on shard ", config_.shard, " (it holds ranges ",
               first_piece_, "..", first_piece_ + static_cast<int>(pieces_.size()) - 1, ")");
  const ShardPiece& p = layout_.pieces[h.range];
  if (h.offset != p.offset || h.count != p.count)
    return cat("range ", h.range, " is elements [", p.offset, ", +", p.count, "), not [", h.offset,
               ", +", h.count, ")");
  if (h.iteration < 0) return cat("iteration ", h.iteration, " is negative");
  const size_t want = static_cast<size_t>(p.count) * sizeof(float);
  if (payload_frames != 1 || payload_bytes != want)
    return cat("push of range ", h.range, " carries ", payload_bytes, " payload bytes; expected ",
               want);
  if (!peer) return "no hello on this connection yet";
  if (h.sender != peer->host)
    return cat("sender ", h.sender, " on a connection that said hello as host ", peer->host);
  if (peer->role != ConnectionRole::kPush)
    return cat("a push on host ", peer->host, "'s sum connection");
  return "";
}

std::string ShardServer::Impl::bye(const MessageHeader& h, const Peer* peer) {
  if (!peer || h.sender != peer->host) return "bye from a connection without hello";
  const ShardStats before = stats();  // only this thread adds to hosts_said_bye
  const std::vector<int>& said = before.hosts_said_bye;
  const bool first = std::find(said.begin(), said.end(), peer->host) == said.end();
  if (first) {
    config_.log(cat("host ", peer->host, " (", peer->address, ") said bye"));
    count([&](ShardStats& s) { s.hosts_said_bye.push_back(peer->host); });
  }
  if (config_.stop_when_hosts_leave &&
      said.size() + (first ? 1 : 0) == static_cast<size_t>(config_.num_hosts))
    stopping_ = true;
  return "";
}

void ShardServer::Impl::send_sum(int local_piece) {
  std::optional<ReadySum> ready = pieces_[local_piece].take_sum();
  if (!ready) return;
  const ShardPiece& p = layout_.pieces[first_piece_ + local_piece];
  const MessageHeader h =
      make_header(MessageKind::kSum, config_.shard, p.range, ready->iteration, p.offset, p.count);
  // Counted before they go: a host that has received a sum finds it in the stats.
  auto goes_now = [&](int host) { return host != p.owner && !sum_routes_[host].empty(); };
  int64_t sent = 0;
  for (int host = 0; host < config_.num_hosts; ++host) sent += goes_now(host) ? 1 : 0;
  count([&](ShardStats& s) {
    s.sums_sent += sent;
    ++s.pieces_summed;
  });
  for (int host = 0; host < config_.num_hosts; ++host) {
    if (host == p.owner) continue;  // gathered rows: their owner has them
    zmq::message_t sum;
    sum.copy(ready->sum);  // shares the buffer (ZeroMQ reference counting), no copy
    if (!goes_now(host)) {
      hold(host, h, std::move(sum));
      continue;
    }
    zmq::message_t route(sum_routes_[host].data(), sum_routes_[host].size());
    send(route, h, &sum);
  }
}

// Only a gathered piece completes before every host joined (a summed one waits for every host's
// push): its rows wait for the host's sum connection, at most two iterations of this shard's
// pieces, as a connected host's unpulled sums may.
void ShardServer::Impl::hold(int host, const MessageHeader& h, zmq::message_t sum) {
  auto& held = held_[host];
  if (held.size() >= 2 * pieces_.size()) {
    config_.log(cat("host ", host, " has no sum connection yet; its sum of range ",
                    held.front().first.range, ", iteration ", held.front().first.iteration,
                    " is dropped"));
    held.pop_front();
  }
  held.emplace_back(h, std::move(sum));
}

void ShardServer::Impl::send_held(int host) {
  const auto sent = static_cast<int64_t>(held_[host].size());
  count([&](ShardStats& s) { s.sums_sent += sent; });  // before they go, as send_sum
  for (auto& [h, sum] : held_[host]) {
    zmq::message_t route(sum_routes_[host].data(), sum_routes_[host].size());
    send(route, h, &sum);
  }
  held_[host].clear();
}

void ShardServer::Impl::reject(zmq::message_t& route, const Peer* peer, const std::string& from,
                               const MessageHeader* h, const std::string& why) {
  // A known host reads its sum connection while it waits, so its errors go there.
  const std::string* sums =
      peer && !sum_routes_[peer->host].empty() ? &sum_routes_[peer->host] : nullptr;
  zmq::message_t to;
  if (sums)
    to.rebuild(sums->data(), sums->size());
  else
    to.copy(route);
  const std::string what =
      h ? cat(kind_name(h->kind), " (iteration ", h->iteration, ", range ", h->range, ")")
        : std::string("message");
  config_.log(cat("rejected ", what, " from ", from, ": ", why));
  count([](ShardStats& s) { ++s.messages_rejected; });
  const std::string text = why.substr(0, kMaxErrorText);
  zmq::message_t body(text.data(), text.size());
  send(to, make_header(MessageKind::kError, config_.shard, h ? h->range : -1, h ? h->iteration : 0),
       &body);
}

void ShardServer::Impl::send(zmq::message_t& route, const MessageHeader& h,
                             zmq::message_t* payload) {
  // ROUTER never blocks: a message for a peer that is gone or not reading is dropped.
  const auto more = zmq::send_flags::sndmore | zmq::send_flags::dontwait;
  router_.send(route, more);
  router_.send(zmq::buffer(&h, sizeof h), payload ? more : zmq::send_flags::dontwait);
  if (payload) router_.send(*payload, zmq::send_flags::dontwait);
}

ShardServer::ShardServer(ShardConfig config) : impl_(std::make_unique<Impl>(std::move(config))) {}
ShardServer::~ShardServer() = default;
const std::string& ShardServer::endpoint() const {
  return impl_->endpoint;
}
bool ShardServer::wait(std::chrono::milliseconds timeout) {
  return impl_->wait(timeout);
}
void ShardServer::stop() {
  impl_->stop();
}
ShardStats ShardServer::stats() const {
  return impl_->stats();
}

}  // namespace cgdp
