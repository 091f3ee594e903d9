// Handshake proofs with libsodium's HMAC-SHA256 and random source.
#include "cgdp/shard/handshake_proof.hpp"

#include <sodium.h>

#include "cgdp/core/error.hpp"

namespace cgdp {

namespace {

void init_sodium() {
  if (sodium_init() < 0) throw Error("libsodium failed to initialise");
}

// HMAC-SHA256 under `token` of the parts, each preceded by its length so that no two lists of
// parts are one byte string.
template <typename... Parts>
Proof hmac_of(const std::string& token, const Parts&... parts) {
  init_sodium();
  crypto_auth_hmacsha256_state state;
  crypto_auth_hmacsha256_init(&state, reinterpret_cast<const unsigned char*>(token.data()),
                              token.size());
  auto add = [&](const void* data, uint64_t size) {
    crypto_auth_hmacsha256_update(&state, reinterpret_cast<const unsigned char*>(&size),
                                  sizeof size);
    crypto_auth_hmacsha256_update(&state, static_cast<const unsigned char*>(data), size);
  };
  (add(parts.data(), parts.size()), ...);
  Proof mac;
  crypto_auth_hmacsha256_final(&state, mac.data());
  return mac;
}

std::string_view bytes_of(const HelloBody& hello) {
  return {reinterpret_cast<const char*>(&hello), sizeof hello};
}
std::string_view bytes_of(const int32_t& value) {
  return {reinterpret_cast<const char*>(&value), sizeof value};
}
std::string_view bytes_of(const Nonce& nonce) {
  return {reinterpret_cast<const char*>(nonce.data()), nonce.size()};
}

}  // namespace

std::string token_hmac(const std::string& token, const std::string& message) {
  init_sodium();
  unsigned char mac[crypto_auth_hmacsha256_BYTES];
  crypto_auth_hmacsha256_state state;
  crypto_auth_hmacsha256_init(&state, reinterpret_cast<const unsigned char*>(token.data()),
                              token.size());
  crypto_auth_hmacsha256_update(&state, reinterpret_cast<const unsigned char*>(message.data()),
                                message.size());
  crypto_auth_hmacsha256_final(&state, mac);
  char hex[2 * sizeof mac + 1];
  sodium_bin2hex(hex, sizeof hex, mac, sizeof mac);
  return hex;
}

Nonce fresh_nonce() {
  init_sodium();
  Nonce nonce;
  randombytes_buf(nonce.data(), nonce.size());
  return nonce;
}

Proof shard_proof(const std::string& token, int rank, const HelloBody& hello,
                  const Nonce& shard_nonce) {
  const int32_t r = rank;
  return hmac_of(token, std::string_view("cgdp shard proof"), bytes_of(r), bytes_of(hello),
                 bytes_of(shard_nonce));
}

Proof host_proof(const std::string& token, int rank, const HelloBody& hello,
                 const Nonce& shard_nonce) {
  const int32_t r = rank;
  return hmac_of(token, std::string_view("cgdp host proof"), bytes_of(r), bytes_of(hello),
                 bytes_of(shard_nonce));
}

bool same_proof(const Proof& a, const Proof& b) {
  return sodium_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace cgdp
