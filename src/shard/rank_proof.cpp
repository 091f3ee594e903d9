// Rank proofs with libsodium's HMAC-SHA256.
#include "cgdp/shard/rank_proof.hpp"

#include <sodium.h>

#include <charconv>

#include "cgdp/core/error.hpp"

namespace cgdp {

namespace {

constexpr int kMaxRank = 1 << 20;  // far above any cluster; bounds what a user name may claim

}  // namespace

std::string rank_user(int rank) { return cat("host-", rank); }

std::string rank_proof(const std::string& token, int rank) { return token_hmac(token, cat("cgdp host ", rank)); }

std::string token_hmac(const std::string& token, const std::string& message) {
  if (sodium_init() < 0) throw Error("libsodium failed to initialise");
  unsigned char mac[crypto_auth_hmacsha256_BYTES];
  crypto_auth_hmacsha256_state state;
  crypto_auth_hmacsha256_init(&state, reinterpret_cast<const unsigned char*>(token.data()), token.size());
  crypto_auth_hmacsha256_update(&state, reinterpret_cast<const unsigned char*>(message.data()),
                                message.size());
  crypto_auth_hmacsha256_final(&state, mac);
  char hex[2 * sizeof mac + 1];
  sodium_bin2hex(hex, sizeof hex, mac, sizeof mac);
  return hex;
}

std::optional<int> proven_rank(const std::string& token, const std::string& user,
                               const std::string& password) {
  const std::string prefix = "host-";
  if (token.empty() || user.rfind(prefix, 0) != 0) return std::nullopt;
  int rank = -1;
  const char* first = user.data() + prefix.size();
  const char* last = user.data() + user.size();
  const auto [end, error] = std::from_chars(first, last, rank);
  if (error != std::errc() || end != last || rank < 0 || rank >= kMaxRank || rank_user(rank) != user)
    return std::nullopt;  // one spelling per rank: "host-07" is not host 7
  const std::string expected = rank_proof(token, rank);
  if (password.size() != expected.size() ||
      sodium_memcmp(password.data(), expected.data(), expected.size()) != 0)
    return std::nullopt;
  return rank;
}

}  // namespace cgdp
