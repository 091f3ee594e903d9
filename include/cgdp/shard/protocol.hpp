// The wire protocol between hosts and parameter-server shards: every ZeroMQ message is one
// fixed-size header frame, then at most one payload frame (floats, a hello body or error text).
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <string>
#include <string_view>

namespace cgdp {

inline constexpr uint32_t kShardMagic = 0x53504743;  // "CGPS" read as little-endian bytes
inline constexpr uint16_t kProtocolVersion = 3;      // 3: the challenge-response handshake
// Hosts and shards run on one architecture family; frames are the structs' bytes as they are.
static_assert(std::endian::native == std::endian::little, "the shard protocol is little-endian");

enum class MessageKind : uint16_t {
  kHello = 1,  // host -> shard: HelloBody, with the host's fresh nonce
  kWelcome,    // shard -> host: the proof and the hello were accepted
  kPush,       // host -> shard: one piece's gradients for `iteration` (count floats)
  kSum,        // shard -> every host's sum connection, unasked: the global sum (count floats)
  kError,      // shard -> host: what was wrong with a message (text), on its sum connection if any
  kBye,        // host -> shard: this host is done; the shard stops once every host said it
  kChallenge,  // shard -> host: ChallengeBody, the answer to a hello (handshake_proof.hpp)
  kProof,      // host -> shard: ProofBody, the answer to the challenge
};
inline constexpr uint16_t kLastKind = static_cast<uint16_t>(MessageKind::kProof);

using Nonce = std::array<uint8_t, 32>;
using Proof = std::array<uint8_t, 32>;  // an HMAC-SHA256

struct MessageHeader {
  uint32_t magic = kShardMagic;
  uint16_t version = kProtocolVersion;
  uint16_t kind = 0;      // a MessageKind
  int32_t sender = 0;     // host rank; the shard's index in messages from a shard
  int32_t range = -1;     // ShardPiece::range, or -1 when the message is about no range
  int64_t iteration = 0;  // training iteration (BSP clock)
  int64_t offset = 0;     // elements into the flat gradient vector
  int64_t count = 0;      // floats in the payload (push, sum)
};
static_assert(sizeof(MessageHeader) == 40, "the header is a fixed 40-byte frame");

// What a host's connection is for. Sums go out unasked on the sum connection, so a pull costs no
// request message; pushes and byes go on the push connection.
enum class ConnectionRole : int32_t { kPush = 0, kSum = 1 };

// The payload of kHello: what both ends must agree on.
struct HelloBody {
  uint64_t layout_fingerprint = 0;  // ShardLayout::fingerprint()
  int32_t num_hosts = 0;
  int32_t num_shards = 0;
  int32_t shard = 0;  // the shard index the host believes it is talking to
  int32_t role = 0;   // a ConnectionRole
  Nonce host_nonce{};  // fresh for each connection: the shard's proof covers it
};
static_assert(sizeof(HelloBody) == 56);

// The payload of kChallenge: the shard's nonce and its proof that it holds the cluster token.
struct ChallengeBody {
  Nonce shard_nonce{};
  Proof shard_proof{};
};
static_assert(sizeof(ChallengeBody) == 64);

// The payload of kProof: the host's proof of its rank, over both nonces.
struct ProofBody {
  Proof host_proof{};
};
static_assert(sizeof(ProofBody) == 32);

MessageHeader make_header(MessageKind kind, int sender, int range = -1, int64_t iteration = 0,
                          int64_t offset = 0, int64_t count = 0);

// Checks a received header frame: its size, magic, version and kind. On success fills `header`
// and returns ""; otherwise returns what is wrong (for the log and the error reply).
std::string parse_header(const void* frame, size_t size, MessageHeader& header);

// "push", "sum", ... or "kind 9" for an unknown value.
std::string kind_name(uint16_t kind);

// The limit on error text a shard sends back, so an error message never grows with hostile input.
inline constexpr size_t kMaxErrorText = 512;

}  // namespace cgdp
