// Each host proves its rank to the shards with an HMAC of the rank under the cluster token, sent
// as the ZeroMQ PLAIN password: the token itself never crosses the network, and a connection
// can only speak for the rank it proved.
#pragma once

#include <optional>
#include <string>

namespace cgdp {

// The PLAIN user name a host connects with: "host-<rank>".
std::string rank_user(int rank);

// Hex HMAC-SHA256 of `message` under `token` (64 characters).
std::string token_hmac(const std::string& token, const std::string& message);

// Hex HMAC-SHA256 of "cgdp host <rank>" under `token` (64 characters).
std::string rank_proof(const std::string& token, int rank);

// The rank that `user` and `password` prove under `token`, or nothing when they prove none.
// Compares in constant time, so the reply time tells nothing about the proof's bytes.
std::optional<int> proven_rank(const std::string& token, const std::string& user,
                               const std::string& password);

}  // namespace cgdp
