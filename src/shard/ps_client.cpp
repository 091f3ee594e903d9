// A host's parameter-server client: per shard two DEALER connections (pushes out, sums in), each
// opened with a challenge-response that proves both ends hold the cluster token; zero-copy pushes
// from the caller's buffer, sums handed out in the buffers ZeroMQ received them into, and a
// deadline on every wait that names the shard which did not answer.
#include "cgdp/shard/ps_client.hpp"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <iterator>
#include <map>
#include <mutex>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "cgdp/core/error.hpp"
#include "cgdp/shard/handshake_proof.hpp"
#include "cgdp/shard/protocol.hpp"
#include "shard/message_memory.hpp"
#include "shard/socket_monitor.hpp"

namespace cgdp {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kHeartbeatMs = 1000;
constexpr int kByeLingerMs = 1000;  // how long closing waits for a bye (and pushes) to go out
constexpr auto kWatchSlice = std::chrono::milliseconds(100);  // how soon a pull sees a lost push
constexpr int kEvents = ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                        ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL;

std::string duration_text(std::chrono::milliseconds d) {
  return d.count() % 1000 == 0 ? cat(d.count() / 1000, " s") : cat(d.count(), " ms");
}

void check_chunk(const ShardLayout& layout, int chunk, const char* what) {
  if (chunk < 0 || chunk >= layout.num_chunks())
    throw UsageError(cat(what, ": chunk ", chunk, " is outside [0, ", layout.num_chunks(), ")"));
}

void check_call(const ShardLayout& layout, int chunk, int64_t count, const char* what) {
  check_chunk(layout, chunk, what);
  if (count != layout.chunk_sizes[chunk])
    throw UsageError(
        cat(what, ": chunk ", chunk, " has ", layout.chunk_sizes[chunk], " elements, not ", count));
}

// Pushed buffers ZeroMQ has not released yet, per chunk: ZeroMQ calls release_push from its I/O
// thread once a zero-copy payload is on the wire (or dropped).
struct SendTracker {
  std::mutex mutex;
  std::condition_variable released;
  std::vector<int> in_flight;
};
struct ChunkHint {
  SendTracker* tracker;
  int chunk;
};
void release_push(void* /*data*/, void* hint) {
  auto* h = static_cast<ChunkHint*>(hint);
  {
    std::lock_guard lock(h->tracker->mutex);
    --h->tracker->in_flight[h->chunk];
  }
  h->tracker->released.notify_all();
}

// One connection to a shard and the monitor of its events.
struct Connection {
  zmq::socket_t socket;
  std::unique_ptr<SocketMonitor> events;  // destroyed before the socket closes
  std::string lost;                       // why the connection is gone, once it is
};

struct ShardLink {
  int index = 0;
  std::string address;
  // Two, so push() and pull() may run on two threads: pushes and byes go out on `push`; the
  // shard sends every sum (and its errors) unasked on `sums`.
  Connection push, sums;
  // push() and pull() both read the push connection's events (push.events, push.lost).
  std::mutex push_events_mutex;
  std::string name() const { return cat("shard ", index, " (", address, ")"); }
};

}  // namespace

class PsClient::Impl {
 public:
  explicit Impl(PsClientConfig config);
  ~Impl();
  void push(int64_t iteration, int chunk, const float* data, int64_t count);
  PulledChunk pull(int64_t iteration, int chunk);

  PsClientConfig config;
  ShardLayout layout;

 private:
  using Pick = Connection ShardLink::*;
  void open(ShardLink& link, Pick which);
  void hello_all();
  // This host's proof for the shard's challenge, once the shard proved it holds the token.
  ProofBody answer_challenge(const ShardLink& link, const HelloBody& hello,
                             const std::vector<zmq::message_t>& frames) const;
  static void send_message(Connection& conn, const MessageHeader& h, const void* body, size_t size);
  // Polls connection `which` of `links` and their monitors until `done()` or `deadline`; calls
  // `on_message` for each readable socket, and `watch` (if any) every kWatchSlice. Throws
  // NetworkError for a lost or refusing shard; returns false at the deadline.
  bool poll_until(const std::vector<ShardLink*>& links, Pick which, Clock::time_point deadline,
                  const std::function<void(ShardLink&)>& on_message,
                  const std::function<bool()>& done, const std::string& during,
                  const std::function<void()>& watch = nullptr);
  // Why `link`'s push connection is gone ("" while it is up). ZeroMQ reconnects it by itself, but
  // the new connection never said hello: the shard rejects every push on it.
  static std::string push_connection_lost(ShardLink& link);
  void wait_released(int chunk, Clock::time_point deadline);
  // One pull() in progress: the chunk's pieces' sums as they come in.
  struct PendingPull {
    int64_t iteration;
    std::span<const ShardPiece> pieces;
    std::vector<zmq::message_t> sums = {};  // by piece; empty until it came
    size_t remaining = 0;
    std::string during = {};
  };
  // Reads one message from `link`'s sum connection into `pull`, or keeps it for a later pull.
  void receive_sum(ShardLink& link, PendingPull& pull);
  // A received sum's checks, then into `pull` or kept for a later pull.
  void file_sum(ShardLink& link, const MessageHeader& h, std::vector<zmq::message_t>& frames,
                PendingPull& pull);

  SendTracker tracker_;
  std::vector<ChunkHint> hints_;  // per chunk, handed to ZeroMQ with each zero-copy payload
  zmq::context_t context_{1};     // after what its I/O thread may still call back into
  std::vector<std::unique_ptr<ShardLink>> links_;
  // Sums that came in while a pull waited for another chunk, by (range, iteration). Pulls come
  // in push order, but shards finish pieces in the order the last host pushed them.
  std::map<std::pair<int, int64_t>, zmq::message_t> early_sums_;
  std::mutex push_mutex_, pull_mutex_;
};

PsClient::Impl::Impl(PsClientConfig c) : config(std::move(c)) {
  if (config.shards.empty()) throw UsageError("parameter-server client: no shard addresses");
  keep_message_buffers_in_heap();
  if (config.num_hosts < 1 || config.rank < 0 || config.rank >= config.num_hosts)
    throw UsageError(cat("host rank ", config.rank, " is outside [0, ", config.num_hosts, ")"));
  if (config.token.empty()) throw UsageError("parameter-server client: no cluster token");
  if (config.timeout.count() <= 0) throw UsageError("parameter-server client: timeout must be > 0");
  for (const int owner : config.chunk_owners)
    if (owner >= config.num_hosts)
      throw UsageError(cat("parameter-server client: a chunk gathered from host ", owner, " of ",
                           config.num_hosts));
  layout = assign_ranges(config.chunk_sizes, static_cast<int>(config.shards.size()), config.limits,
                         config.chunk_owners);
  tracker_.in_flight.assign(layout.num_chunks(), 0);
  for (int c = 0; c < layout.num_chunks(); ++c) hints_.push_back({&tracker_, c});
  for (size_t s = 0; s < config.shards.size(); ++s) {
    auto link = std::make_unique<ShardLink>();
    link->index = static_cast<int>(s);
    link->address = config.shards[s];
    open(*link, &ShardLink::push);
    open(*link, &ShardLink::sums);
    links_.push_back(std::move(link));
  }
  hello_all();
  // Connected: from now on closing waits a little for the byes (and pushes) to go out.
  for (auto& link : links_) link->push.socket.set(zmq::sockopt::linger, kByeLingerMs);
}

PsClient::Impl::~Impl() {
  const MessageHeader bye = make_header(MessageKind::kBye, config.rank);
  for (auto& link : links_)
    if (link->push.lost.empty())
      (void)link->push.socket.send(zmq::buffer(&bye, sizeof bye), zmq::send_flags::dontwait);
  for (auto& link : links_) {
    link->push.events.reset();
    link->sums.events.reset();
  }
}

void PsClient::Impl::open(ShardLink& link, Pick which) {
  Connection& conn = link.*which;
  conn.socket = zmq::socket_t(context_, zmq::socket_type::dealer);
  conn.events = std::make_unique<SocketMonitor>(context_, conn.socket, kEvents);
  conn.socket.set(zmq::sockopt::heartbeat_ivl, kHeartbeatMs);
  conn.socket.set(zmq::sockopt::heartbeat_timeout, 3 * kHeartbeatMs);
  conn.socket.set(zmq::sockopt::sndhwm, 0);  // a push never blocks: payloads are references
  conn.socket.set(zmq::sockopt::rcvhwm, 0);
  conn.socket.set(zmq::sockopt::linger, 0);
  try {
    conn.socket.connect(link.address);
  } catch (const zmq::error_t& e) {
    throw UsageError(cat("shard ", link.index, " address '", link.address, "': ", e.what(),
                         " (expected e.g. tcp://10.0.0.2:5601)"));
  }
}

bool PsClient::Impl::poll_until(const std::vector<ShardLink*>& links, Pick which,
                                Clock::time_point deadline,
                                const std::function<void(ShardLink&)>& on_message,
                                const std::function<bool()>& done, const std::string& during,
                                const std::function<void()>& watch) {
  std::vector<zmq::pollitem_t> items;
  for (ShardLink* l : links) {
    items.push_back({(l->*which).socket.handle(), 0, ZMQ_POLLIN, 0});
    items.push_back({(l->*which).events->socket().handle(), 0, ZMQ_POLLIN, 0});
  }
  while (!done()) {
    if (watch) watch();
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    zmq::poll(items, watch ? std::min<std::chrono::milliseconds>(left, kWatchSlice) : left);
    for (size_t i = 0; i < links.size(); ++i) {
      ShardLink& link = *links[i];
      Connection& conn = link.*which;
      while (auto e = conn.events->next()) {
        if (e->event == ZMQ_EVENT_DISCONNECTED) {
          conn.lost = cat("lost the connection to ", link.name());
          throw NetworkError(cat(conn.lost, " ", during));
        }
        throw NetworkError(
            cat(link.name(), ": ", event_name(e->event), "; is a cgdp shard listening there?"));
      }
      if (items[2 * i].revents & ZMQ_POLLIN) on_message(link);
    }
  }
  return true;
}

void PsClient::Impl::hello_all() {
  std::vector<ShardLink*> links;
  for (auto& l : links_) links.push_back(l.get());
  const auto deadline = Clock::now() + config.timeout;
  for (Pick which : {&ShardLink::push, &ShardLink::sums}) {
    const ConnectionRole role =
        which == &ShardLink::push ? ConnectionRole::kPush : ConnectionRole::kSum;
    enum Step : char { kSaidHello, kProved, kWelcomed };
    std::vector<Step> step(links.size(), kSaidHello);
    std::vector<HelloBody> hellos(links.size());
    for (ShardLink* l : links) {
      HelloBody& body = hellos[l->index];
      body = {layout.fingerprint(),       config.num_hosts, layout.num_shards, l->index,
              static_cast<int32_t>(role), fresh_nonce()};
      send_message(l->*which, make_header(MessageKind::kHello, config.rank), &body, sizeof body);
    }
    auto on_message = [&](ShardLink& link) {
      std::vector<zmq::message_t> frames;
      (void)zmq::recv_multipart((link.*which).socket, std::back_inserter(frames));
      MessageHeader h;
      // A shard of another cgdp version says so here, before anything else could go wrong.
      if (const std::string bad = parse_header(frames[0].data(), frames[0].size(), h); !bad.empty())
        throw NetworkError(
            cat(link.name(), " answered the hello with a message this build cannot read: ", bad));
      const auto kind = static_cast<MessageKind>(h.kind);
      if (kind == MessageKind::kError)
        throw NetworkError(cat(link.name(), " rejected the hello of host ", config.rank, ": ",
                               frames.size() > 1 ? frames[1].to_string() : std::string()));
      Step& at = step[link.index];
      if (kind == MessageKind::kSum && at == kWelcomed && role == ConnectionRole::kSum) {
        // Another host's gathered rows may come before every shard welcomed this one.
        PendingPull none{-1, {}};
        file_sum(link, h, frames, none);
      } else if (kind == MessageKind::kChallenge && at == kSaidHello) {
        const ProofBody proof = answer_challenge(link, hellos[link.index], frames);
        send_message(link.*which, make_header(MessageKind::kProof, config.rank), &proof,
                     sizeof proof);
        at = kProved;
      } else if (kind == MessageKind::kWelcome && at == kProved) {
        at = kWelcomed;
      } else {
        throw NetworkError(cat(link.name(), " answered the hello with an unexpected ",
                               kind_name(h.kind), " message: is a cgdp shard listening there?"));
      }
    };
    auto done = [&] {
      return std::all_of(step.begin(), step.end(), [](Step s) { return s == kWelcomed; });
    };
    // A shard that vanishes mid-hello: usually its host stopped on an error of its own.
    const char* during =
        "while saying hello (its host may have stopped on an error of its own: see that host's output)";
    if (!poll_until(links, which, deadline, on_message, done, during)) {
      std::string missing;
      for (ShardLink* l : links)
        if (step[l->index] != kWelcomed) missing += (missing.empty() ? "" : ", ") + l->name();
      throw NetworkError(cat("no answer from ", missing, " for ", duration_text(config.timeout),
                             " (is it running and listening there?)"));
    }
  }
}

ProofBody PsClient::Impl::answer_challenge(const ShardLink& link, const HelloBody& hello,
                                           const std::vector<zmq::message_t>& frames) const {
  ChallengeBody challenge;
  if (frames.size() != 2 || frames[1].size() != sizeof challenge)
    throw NetworkError(cat(link.name(), " answered the hello with a malformed challenge"));
  std::memcpy(&challenge, frames[1].data(), sizeof challenge);
  // Checked before this host proves anything: a process without the token learns nothing here.
  if (!same_proof(challenge.shard_proof,
                  shard_proof(config.token, config.rank, hello, challenge.shard_nonce)))
    throw NetworkError(
        cat(link.name(),
            " did not prove that it holds this cluster's token: another process may be "
            "listening on its port, or that host has another token (this host sent it "
            "nothing but its hello)"));
  return {host_proof(config.token, config.rank, hello, challenge.shard_nonce)};
}

void PsClient::Impl::send_message(Connection& conn, const MessageHeader& h, const void* body,
                                  size_t size) {
  conn.socket.send(zmq::buffer(&h, sizeof h), zmq::send_flags::sndmore);
  conn.socket.send(zmq::buffer(body, size));
}

void PsClient::Impl::push(int64_t iteration, int chunk, const float* data, int64_t count) {
  check_call(layout, chunk, count, "push");
  if (const int owner = layout.chunk_owner(chunk); owner != kSummed && owner != config.rank)
    throw UsageError(cat("push: chunk ", chunk, " is gathered from host ", owner,
                         ", not from host ", config.rank));
  std::lock_guard lock(push_mutex_);
  for (const ShardPiece& p : layout.pieces_of_chunk(chunk)) {
    ShardLink& link = *links_[p.shard];
    if (const std::string lost = push_connection_lost(link); !lost.empty())
      throw NetworkError(cat(lost, " while pushing iteration ", iteration, ", chunk ", chunk));
    const MessageHeader h =
        make_header(MessageKind::kPush, config.rank, p.range, iteration, p.offset, p.count);
    {
      std::lock_guard sent(tracker_.mutex);
      ++tracker_.in_flight[chunk];
    }
    // Zero-copy: ZeroMQ reads the floats from the caller's buffer when it writes the socket.
    zmq::message_t payload(const_cast<float*>(data + p.chunk_offset), p.count * sizeof(float),
                           release_push, &hints_[chunk]);
    link.push.socket.send(zmq::buffer(&h, sizeof h), zmq::send_flags::sndmore);
    link.push.socket.send(payload, zmq::send_flags::none);
  }
}

std::string PsClient::Impl::push_connection_lost(ShardLink& link) {
  std::lock_guard lock(link.push_events_mutex);
  while (auto e = link.push.events->next())
    if (link.push.lost.empty())  // the first event says why; a reconnection's come after it
      link.push.lost =
          e->event == ZMQ_EVENT_DISCONNECTED
              ? cat("lost the connection to ", link.name())
              : cat("the connection to ", link.name(), " failed (", event_name(e->event), ")");
  return link.push.lost;
}

void PsClient::Impl::wait_released(int chunk, Clock::time_point deadline) {
  std::unique_lock lock(tracker_.mutex);
  if (!tracker_.released.wait_until(lock, deadline, [&] { return tracker_.in_flight[chunk] == 0; }))
    throw NetworkError(
        cat("chunk ", chunk, "'s pushes were not sent within ", duration_text(config.timeout)));
}

PulledChunk PsClient::Impl::pull(int64_t iteration, int chunk) {
  check_chunk(layout, chunk, "pull");
  std::lock_guard lock(pull_mutex_);
  if (layout.chunk_owner(chunk) == config.rank) {  // this host's own rows: nothing comes back
    wait_released(chunk, Clock::now() + config.timeout);
    return PulledChunk();
  }
  PendingPull pull{iteration, layout.pieces_of_chunk(chunk)};
  pull.sums.resize(pull.pieces.size());
  pull.during = cat("while pulling iteration ", iteration, ", chunk ", chunk);
  const auto deadline = Clock::now() + config.timeout;
  std::vector<ShardLink*> links;
  for (size_t i = 0; i < pull.pieces.size(); ++i) {
    const ShardPiece& p = pull.pieces[i];
    if (auto early = early_sums_.find({p.range, iteration}); early != early_sums_.end()) {
      pull.sums[i] = std::move(early->second);
      early_sums_.erase(early);
      continue;
    }
    ++pull.remaining;
    ShardLink& link = *links_[p.shard];
    if (!link.sums.lost.empty()) throw NetworkError(cat(link.sums.lost, " ", pull.during));
    if (links.empty() || links.back() != &link) links.push_back(&link);
  }
  auto on_message = [&](ShardLink& link) { receive_sum(link, pull); };
  // The sums wait for this host's pushes too: a lost push connection means they never come.
  auto watch_pushes = [&] {
    for (ShardLink* link : links)
      if (const std::string lost = push_connection_lost(*link); !lost.empty())
        throw NetworkError(cat(lost, " ", pull.during));
  };
  if (!poll_until(
          links, &ShardLink::sums, deadline, on_message, [&] { return pull.remaining == 0; },
          pull.during, watch_pushes)) {
    std::string missing;
    for (size_t i = 0; i < pull.pieces.size(); ++i) {
      const std::string name = links_[pull.pieces[i].shard]->name();
      if (pull.sums[i].empty() && missing.find(name) == std::string::npos)
        missing += (missing.empty() ? "" : ", ") + name;
    }
    throw NetworkError(
        cat("no sum from ", missing, " for ", duration_text(config.timeout), " ", pull.during));
  }
  wait_released(chunk, deadline);  // the caller may overwrite the pushed buffer once we return
  std::vector<PulledChunk::Piece> pieces;
  for (size_t i = 0; i < pull.pieces.size(); ++i)
    pieces.push_back(
        {pull.pieces[i].chunk_offset, pull.sums[i].data<float>(), pull.pieces[i].count});
  return PulledChunk(std::move(pieces),
                     std::make_shared<std::vector<zmq::message_t>>(std::move(pull.sums)));
}

void PsClient::Impl::receive_sum(ShardLink& link, PendingPull& pull) {
  std::vector<zmq::message_t> frames;
  (void)zmq::recv_multipart(link.sums.socket, std::back_inserter(frames));
  MessageHeader h;
  if (const std::string bad = parse_header(frames[0].data(), frames[0].size(), h); !bad.empty())
    throw NetworkError(cat(link.name(), " sent a malformed message: ", bad));
  if (h.kind == static_cast<uint16_t>(MessageKind::kError))
    throw NetworkError(cat(link.name(), " rejected a message of host ", config.rank, " (",
                           pull.during, "): ", frames.size() > 1 ? frames[1].to_string() : ""));
  if (h.kind != static_cast<uint16_t>(MessageKind::kSum))
    throw NetworkError(
        cat(link.name(), " sent an unexpected ", kind_name(h.kind), " ", pull.during));
  file_sum(link, h, frames, pull);
}

void PsClient::Impl::file_sum(ShardLink& link, const MessageHeader& h,
                              std::vector<zmq::message_t>& frames, PendingPull& pull) {
  const bool known = h.range >= 0 && h.range < static_cast<int>(layout.pieces.size());
  const ShardPiece* p = known ? &layout.pieces[h.range] : nullptr;
  const size_t bytes = p ? static_cast<size_t>(p->count) * sizeof(float) : 0;
  if (!p || p->shard != link.index || h.offset != p->offset || h.count != p->count ||
      frames.size() != 2 || frames[1].size() != bytes)
    throw NetworkError(cat(link.name(), " sent a sum for range ", h.range, " (", frames.size(),
                           " frames) that does not match this host's layout"));
  zmq::message_t sum = aligned_floats(std::move(frames[1]));
  for (size_t i = 0; i < pull.pieces.size(); ++i)
    if (pull.pieces[i].range == h.range && h.iteration == pull.iteration && pull.sums[i].empty()) {
      pull.sums[i] = std::move(sum);
      --pull.remaining;
      return;
    }
  // A sum for a later pull. Every pushed chunk is pulled, so at most two iterations wait here.
  if (early_sums_.count({h.range, h.iteration}))
    throw NetworkError(
        cat(link.name(), " sent range ", h.range, " of iteration ", h.iteration, " twice"));
  if (early_sums_.size() >= 2 * layout.pieces.size())
    throw NetworkError(cat(early_sums_.size(), " sums wait to be pulled (", link.name(),
                           " sent range ", h.range, " of iteration ", h.iteration,
                           "); every pushed chunk must be pulled"));
  early_sums_.emplace(std::make_pair(h.range, h.iteration), std::move(sum));
}

PsClient::PsClient(PsClientConfig config) : impl_(std::make_unique<Impl>(std::move(config))) {}
PsClient::~PsClient() = default;
const ShardLayout& PsClient::layout() const {
  return impl_->layout;
}
void PsClient::push(int64_t iteration, int chunk, const float* data, int64_t count) {
  impl_->push(iteration, chunk, data, count);
}
PulledChunk PsClient::pull(int64_t iteration, int chunk) {
  return impl_->pull(iteration, chunk);
}
void PsClient::pull(int64_t iteration, int chunk, float* out, int64_t count) {
  check_call(impl_->layout, chunk, count, "pull");
  impl_->pull(iteration, chunk).copy_to(out);
}

}  // namespace cgdp
