// Text from an input, made fit to echo in a one-line message.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace cgdp {

// `text` with bytes that are not printable ASCII written as \xNN, cut after `most` characters
// with the length said: a 200,000-character layer type, or a key of a damaged database, would
// otherwise be echoed whole or as raw bytes.
inline std::string excerpt(std::string_view text, size_t most = 64) {
  std::string out;
  for (size_t i = 0; i < text.size() && i < most; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    }
  }
  if (text.size() > most) out += "... (" + std::to_string(text.size()) + " characters)";
  return out;
}

}  // namespace cgdp
