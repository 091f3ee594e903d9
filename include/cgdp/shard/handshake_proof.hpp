// Each connection between a host and a shard opens with a challenge-response under the cluster
// token: the host's hello carries a fresh nonce, the shard answers with a fresh nonce of its own
// and an HMAC over both, and the host answers with an HMAC over both for its rank. Each side
// proves it holds the token, the token never crosses the network, and no proof seen on one
// connection is valid on another (each covers the other side's fresh nonce).
#pragma once

#include <string>

#include "cgdp/shard/protocol.hpp"

namespace cgdp {

// Hex HMAC-SHA256 of `message` under `token` (64 characters).
std::string token_hmac(const std::string& token, const std::string& message);

// 32 bytes from the system's random source.
Nonce fresh_nonce();

// The shard's proof: HMAC of "cgdp shard proof", the host's rank and hello (its nonce and the
// shard index it expects included) and the shard's nonce.
Proof shard_proof(const std::string& token, int rank, const HelloBody& hello,
                  const Nonce& shard_nonce);

// The host's proof: HMAC of "cgdp host proof", its rank, its hello and the shard's nonce. The
// two labels differ, so a shard's proof is never a host's.
Proof host_proof(const std::string& token, int rank, const HelloBody& hello,
                 const Nonce& shard_nonce);

// Compares in constant time, so the reply time tells nothing about a proof's bytes.
bool same_proof(const Proof& a, const Proof& b);

}  // namespace cgdp
